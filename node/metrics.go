package node

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/version"
	"github.com/sluice-rl/sluice/limiter"
)

// memberStates are the states sluice_members reports, each always present.
var memberStates = []cluster.State{cluster.Alive, cluster.Suspect}

// registerNodeMetrics registers the build, grant and membership metrics
// on reg and returns the counter of ring changes, which onMembership adds to.
func (n *Node) registerNodeMetrics(reg prometheus.Registerer) (prometheus.Counter, error) {
	ringChanges := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_ring_changes_total",
		Help: "Rings this node built from a membership change (a member joined, left or failed).",
	})
	cs := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_build_info",
			Help: "Always 1; its labels tell the build: version, commit and Go version.",
			ConstLabels: prometheus.Labels{
				"version": version.String(), "commit": version.CommitString(), "goversion": runtime.Version(),
			},
		}, func() float64 { return 1 }),
		ringChanges,
		&membersCollector{n: n, desc: prometheus.NewDesc("sluice_members",
			"Members this node sees, by state.", []string{"state"}, nil)},
	}
	// The grant counters, read from limiter.GrantStats at each scrape.
	for _, g := range []struct {
		name, help string
		of         func(s *limiter.GrantStats) uint64
	}{
		{"sluice_grant_local_checks_total", "Checks this node answered from a local token grant or a cached denial, without a network hop.",
			func(s *limiter.GrantStats) uint64 { return s.Local }},
		{"sluice_grant_requests_total", "Grant requests this node sent to the owners of hot keys.",
			func(s *limiter.GrantStats) uint64 { return s.Requests }},
		{"sluice_grant_misses_total", "Checks of a granted key that found no token left and waited for a grant.",
			func(s *limiter.GrantStats) uint64 { return s.Misses }},
		{"sluice_grant_tokens_granted_total", "Tokens the owners of hot keys granted this node.",
			func(s *limiter.GrantStats) uint64 { return s.Granted }},
		{"sluice_grant_tokens_expired_total", "Granted tokens that lapsed unspent: the grant's TTL passed, or the key went idle.",
			func(s *limiter.GrantStats) uint64 { return s.Expired }},
		{"sluice_grant_tokens_returned_total", "Unspent granted tokens this node gave back to their issuer (the key moved, the node left or stopped needing them).",
			func(s *limiter.GrantStats) uint64 { return s.Returned }},
		{"sluice_grant_return_failures_total", "Returns of unspent grant tokens that failed (the issuer was unreachable); their tokens lapse.",
			func(s *limiter.GrantStats) uint64 { return s.ReturnFailures }},
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: g.name, Help: g.help},
			func() float64 { s := n.limiter.GrantStats(); return float64(g.of(&s)) }))
	}
	// Replication, read from limiter.ReplicaStats at each scrape.
	for _, r := range []struct {
		name, help string
		of         func(s *limiter.ReplicaStats) uint64
	}{
		{"sluice_replica_states_sent_total", "States this node copied to their keys' heirs.",
			func(s *limiter.ReplicaStats) uint64 { return s.Sent }},
		{"sluice_replica_states_failed_total", "States whose copy to an heir failed (sent again when next changed).",
			func(s *limiter.ReplicaStats) uint64 { return s.Failed }},
		{"sluice_replica_states_received_total", "Copies of other owners' states this node took as an heir.",
			func(s *limiter.ReplicaStats) uint64 { return s.Received }},
		{"sluice_replica_states_promoted_total", "Copies this node took over as its own states when their owner left the ring without handing off.",
			func(s *limiter.ReplicaStats) uint64 { return s.Promoted }},
		{"sluice_replica_states_pushed_total", "Copies this node handed to a departed owner's new owner.",
			func(s *limiter.ReplicaStats) uint64 { return s.Pushed }},
	} {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: r.name, Help: r.help},
			func() float64 { s := n.limiter.ReplicaStats(); return float64(r.of(&s)) }))
	}
	cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_replica_states",
		Help: "Copies of other owners' states this node holds as an heir."},
		func() float64 { return float64(n.limiter.ReplicaStats().Held) }))
	cs = append(cs, n.diskMetrics()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return ringChanges, nil
}

// membersCollector counts the members of the cluster's snapshot by the
// state the node shows (memberState) at each scrape.
type membersCollector struct {
	n    *Node
	desc *prometheus.Desc
}

func (c *membersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *membersCollector) Collect(ch chan<- prometheus.Metric) {
	count := map[cluster.State]int{}
	for _, m := range c.n.cluster.Snapshot().Members {
		count[c.n.memberState(m)]++
	}
	for _, s := range memberStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(count[s]), s.String())
	}
}
