package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// A node that restarts gracefully at the same addresses gets its keys back
// with their counts, at once, even though the others' calls to it while it
// was gone (fetches from the likely holder of a pending partition) opened
// their circuits to it: a member new to the ring gets a new connection.
// The breakers' cooldowns run on the test's frozen clock, so a circuit
// kept open would stay open: the handoff back to the node would fail and
// its keys' checks would be answered by fallback.
func TestClusterRestartedNodeStartsWithClosedCircuits(t *testing.T) {
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	frozen := func(c *node.Config) { node.SetPeerBreakerClock(c, tc.clk.Now) }
	for i := 0; i < 3; i++ {
		tc.addWith(fmt.Sprintf("n%d", i), frozen)
	}
	tc.waitConverged()
	lim := client.Limit{Limit: 100, Period: time.Hour}
	ks := keys(60)
	byOwner := spend(t, newClient(t, tc.nodes[0].GRPCAddr()), ks, lim)
	back := tc.nodes[1]
	if len(byOwner[back.Name()]) == 0 {
		t.Fatalf("%s owns none of %d keys: %v", back.Name(), len(ks), byOwner)
	}
	self, ok := tc.nodes[0].Limiter().Ring().Member(back.Name())
	if !ok {
		t.Fatalf("%s is not on %s's ring", back.Name(), tc.nodes[0].Name())
	}
	grpcAddr, httpAddr, peerAddr, gossipAddr := back.GRPCAddr(), back.HTTPAddr(), back.PeerAddr(), back.GossipAddr()
	tc.stop(back.Name())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range tc.nodes {
		if err := node.OpenCircuit(ctx, n, self); err != nil {
			t.Fatal(err)
		}
	}
	tc.addWith(back.Name(), func(c *node.Config) {
		frozen(c)
		c.GRPCAddr, c.HTTPAddr, c.PeerAddr, c.GossipAddr = grpcAddr, httpAddr, peerAddr, gossipAddr
	})
	tc.waitConverged()
	for _, n := range tc.nodes[:2] {
		c := newClient(t, n.GRPCAddr())
		for _, k := range byOwner[back.Name()] {
			res := ownerOf(t, c, k, lim)
			if res.Owner != back.Name() || res.Source != "owner" || res.Remaining != 40 {
				t.Errorf("%s asked of %s after %s came back: owner %s (%s), remaining %d; want %s (owner), 40",
					k, n.Name(), back.Name(), res.Owner, res.Source, res.Remaining, back.Name())
			}
		}
	}
}
