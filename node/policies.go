package node

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/version"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/transport"
)

// newPolicies loads Config.PolicyFile (the empty set without one) and
// prepares the watch that Run starts.
func (n *Node) newPolicies() (*policy.Set, error) {
	n.policyReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_policy_reloads_total",
		Help: "Re-reads of the policy file (watched, SIGHUP) that changed the policies (applied) or were refused, keeping those in force (rejected).",
	}, []string{"result"})
	for _, r := range []string{"applied", "rejected"} {
		n.policyReloads.WithLabelValues(r)
	}
	n.metaKick = make(chan struct{}, 1)
	set := policy.Empty()
	if n.cfg.PolicyFile != "" {
		r, err := policy.NewReloader(policy.ReloaderConfig{
			Path:  n.cfg.PolicyFile,
			Apply: n.applyPolicies,
			Rejected: func(err error) {
				n.policyReloads.WithLabelValues("rejected").Inc()
				n.policyState.record(n.now(), "rejected: "+err.Error())
			},
			Logger: n.log,
		})
		if err != nil {
			return nil, fmt.Errorf("node: policies: %w", err)
		}
		n.policyLoad, set = r, r.Set()
		n.policyState.record(n.now(), "loaded")
	}
	h := set.Hash()
	n.policyHash.Store(&h)
	return set, nil
}

// applyPolicies swaps in a reloaded set (the limiter's states, the
// counters, stay) and has the new hash gossiped.
func (n *Node) applyPolicies(s *policy.Set) {
	n.limiter.SetPolicies(s)
	h := s.Hash()
	n.policyHash.Store(&h)
	n.policyReloads.WithLabelValues("applied").Inc()
	n.policyState.record(n.now(), "applied")
	n.kickMeta()
}

// kickMeta has metaLoop gossip the node's metadata again.
func (n *Node) kickMeta() {
	select {
	case n.metaKick <- struct{}{}:
	default:
	}
}

// PolicyHash returns the policy.Set.Hash of the policies in force, which
// the node gossips in its metadata.
func (n *Node) PolicyHash() string { return *n.policyHash.Load() }

// meta is the metadata the node advertises.
func (n *Node) meta() cluster.NodeMeta {
	return cluster.NodeMeta{GRPCAddr: n.grpcAdv, PeerAddr: n.peerAdv, Version: version.String(), PolicyHash: n.PolicyHash(), RLSHash: n.RLSHash(),
		Protocol: transport.PeerProtocol, Raft: n.advert()}
}

// metaLoop gossips the node's metadata again after each policy or RLS
// configuration change and each epoch applied (kickMeta), and when its
// Raft advert changed otherwise (a new Raft ID after the node's group
// dissolved), which it checks every ten of the group's ticks.
func (n *Node) metaLoop(ctx context.Context) {
	check := time.NewTicker(10 * n.epochs.cfg.TickInterval)
	defer check.Stop()
	sent := n.advert() // New gossiped it
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			if n.advert() == sent {
				continue
			}
		case <-n.metaKick:
		}
		meta := n.meta()
		if err := n.cluster.UpdateMeta(meta, time.Second); err != nil && !n.stopping.Load() && ctx.Err() == nil {
			n.log.Warn("metadata (policy and RLS hashes, Raft advert) not gossiped", "err", err)
		}
		sent = meta.Raft
	}
}

// mismatches counts the members whose hash (of) differs from this node's
// (local); members that advertise none (older versions) are not counted.
func (n *Node) mismatches(local string, of func(cluster.Member) string) int {
	count := 0
	for _, m := range n.cluster.Snapshot().Members {
		if h := of(m); m.Name != n.cfg.NodeName && h != "" && h != local {
			count++
		}
	}
	return count
}

// registerPolicyMetrics exports sluice_policy_reloads_total{result},
// sluice_policy_mismatch_members and sluice_rls_config_mismatch_members.
func (n *Node) registerPolicyMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		n.policyReloads,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_policy_mismatch_members",
			Help: "Members whose policy hash (gossiped) differs from this node's: 0 when the cluster runs one policy file.",
		}, func() float64 {
			return float64(n.mismatches(n.PolicyHash(), func(m cluster.Member) string { return m.PolicyHash }))
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_rls_config_mismatch_members",
			Help: "Members whose RLS configuration hash (gossiped) differs from this node's: 0 when the cluster runs one RLS configuration.",
		}, func() float64 {
			return float64(n.mismatches(n.RLSHash(), func(m cluster.Member) string { return m.RLSHash }))
		}),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
