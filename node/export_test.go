package node

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/ring"
)

// SetPeerBreakerClock makes the peer circuit breakers of the node built
// from cfg time their cooldowns on now: on a frozen clock, an open circuit
// stays open until a call closes it or its connection is dropped.
func SetPeerBreakerClock(cfg *Config, now func() time.Time) { cfg.peerBreakerClock = now }

// OpenCircuit calls m from n, as a fetch of a pending partition from a
// node that has gone does, until n's circuit to m is open. Nothing may be
// listening at m's address.
func OpenCircuit(ctx context.Context, n *Node, m ring.Member) error {
	for !n.peers.CircuitOpen(m.Name) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("the circuit of %s to %s did not open: %w", n.Name(), m.Name, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, _ = n.peers.Fetch(cctx, m, []uint64{1})
		cancel()
	}
	return nil
}

// DiskStats returns the states the node's data directory writer wrote
// and failed to write.
func DiskStats(n *Node) (written, failed uint64) {
	if n.disk.w == nil {
		return 0, 0
	}
	s := n.disk.w.Stats()
	return s.Written, s.Failed
}

// EpochState is what a node's member of the Raft group of the ring's
// epochs knows (epochs.go).
type EpochState struct {
	Group            uint64
	Leader           bool
	Lead             string
	Voters, Learners []string
	// Epoch is the number of the last epoch applied; Members its ring,
	// by name; Change what made it ("join n1", "leave n2", "dead n3").
	Epoch   uint64
	Members []string
	Change  string
	// LeaseValid: the node holds an owner lease now.
	LeaseValid bool
}

// Epochs returns n's EpochState.
func Epochs(n *Node) EpochState {
	st := n.epochs.node.Status()
	s := EpochState{Group: st.Group, Leader: st.Leader, Lead: st.Lead, Voters: st.Voters, Learners: st.Learners,
		Epoch: st.Epoch.Number, LeaseValid: n.epochs.node.LeaseUntil().After(time.Now())}
	for _, m := range st.Epoch.Members {
		s.Members = append(s.Members, m.Name)
	}
	if st.Epoch.Number > 0 {
		s.Change = st.Epoch.Change.Kind.String() + " " + st.Epoch.Change.Name
	}
	return s
}

// EpochLeaseBound is how long a node cut off from its group's majority
// may keep its owner lease: the election timeout plus the lease duration
// of its group's configuration (epoch package doc).
func EpochLeaseBound(n *Node) time.Duration {
	return n.epochs.cfg.ElectionTimeout() + n.epochs.cfg.LeaseDuration
}
