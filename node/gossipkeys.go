package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/cluster"
)

// registerGossipKeyMetrics exports the state of the gossip keyring:
// sluice_gossip_encrypted, sluice_gossip_keys and
// sluice_gossip_key_reloads_total{result="applied"|"rejected"}.
func registerGossipKeyMetrics(reg prometheus.Registerer, c *cluster.Cluster) error {
	reloads := func(rejected bool) func() float64 {
		return func() float64 {
			s := c.GossipKeyStatus()
			if rejected {
				return float64(s.Rejected)
			}
			return float64(s.Reloads)
		}
	}
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_gossip_encrypted",
			Help: "1 when gossip is encrypted (--gossip-key-file), else 0.",
		}, func() float64 {
			if c.GossipKeyStatus().Enabled {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_gossip_keys",
			Help: "Keys installed in the gossip keyring (2 during a rotation).",
		}, func() float64 { return float64(len(c.GossipKeyStatus().Keys)) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "sluice_gossip_key_reloads_total",
			Help:        "Re-reads of the gossip key file that changed the keyring (applied) or were refused, keeping it (rejected).",
			ConstLabels: prometheus.Labels{"result": "applied"},
		}, reloads(false)),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "sluice_gossip_key_reloads_total",
			Help:        "Re-reads of the gossip key file that changed the keyring (applied) or were refused, keeping it (rejected).",
			ConstLabels: prometheus.Labels{"result": "rejected"},
		}, reloads(true)),
	}
	for _, col := range cs {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}
