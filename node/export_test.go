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
		_, _, _ = n.peers.Fetch(cctx, m, []uint64{1})
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
