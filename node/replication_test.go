package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// A kill -9 of an owner loses no replicated count: once its heirs hold the
// copies, the keys it owned carry on from 60 used of 100 on their new
// owners. With replication off they start afresh, as before it.
func TestClusterKillKeepsReplicatedCounters(t *testing.T) {
	for _, tcase := range []struct {
		name     string
		replicas int
		want     int64
	}{{"replicated", 1, 40}, {"off", 0, 100}} {
		t.Run(tcase.name, func(t *testing.T) {
			tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
			for i := 0; i < 3; i++ {
				tc.addWith(fmt.Sprintf("n%d", i), func(c *node.Config) { c.Replicas = tcase.replicas })
			}
			tc.waitConverged()
			lim := client.Limit{Limit: 100, Period: time.Hour}
			ks := keys(60)
			byOwner := spend(t, newClient(t, tc.nodes[0].GRPCAddr()), ks, lim)
			victim := tc.nodes[2]
			if len(byOwner[victim.Name()]) == 0 {
				t.Fatalf("%s owns none of %d keys: %v", victim.Name(), len(ks), byOwner)
			}
			if tcase.replicas > 0 {
				waitFor(t, 10*time.Second, "the victim's states copied to their heirs", func() bool {
					held := int64(0)
					for _, n := range tc.nodes[:2] {
						held += n.Limiter().ReplicaStats().Held
					}
					return held >= int64(len(byOwner[victim.Name()]))
				})
			}
			victim.Inject(node.FaultCrash)
			tc.nodes = tc.nodes[:2]
			tc.waitConverged()
			c := newClient(t, tc.nodes[1].GRPCAddr())
			// The new owners decide the keys once the dead wait is over.
			waitFor(t, 10*time.Second, "the new owners' answers", func() bool {
				for _, k := range byOwner[victim.Name()] {
					if ownerOf(t, c, k, lim).Source != "owner" {
						return false
					}
				}
				return true
			})
			for _, k := range byOwner[victim.Name()] {
				res := ownerOf(t, c, k, lim)
				if res.Owner == victim.Name() || res.Remaining != tcase.want {
					t.Errorf("%s on %s after its owner %s was killed: remaining %d, want %d",
						k, res.Owner, victim.Name(), res.Remaining, tcase.want)
				}
			}
		})
	}
}

// Between a kill -9 of an owner and the ring moving its keys, the other
// nodes send the keys' checks to their first heir, which decides them on
// its copy: a key spent to 60 of 100 admits 40 more in all, through every
// node, before and after the ring moves it, not a local share per node.
func TestClusterHeirActsForKilledOwner(t *testing.T) {
	tc := newTestCluster(t, 3)
	lim := client.Limit{Limit: 100, Period: time.Hour}
	c0 := newClient(t, tc.nodes[0].GRPCAddr())
	victim := tc.nodes[2]
	ks := keysOwnedBy(t, c0, victim.Name(), "heir", 4, lim)
	for _, k := range ks {
		if res, err := c0.Check(context.Background(), client.Item{Key: k, Limit: lim, Cost: 60}); err != nil || !res[0].Allowed {
			t.Fatalf("spend %s: %+v %v", k, res, err)
		}
	}
	waitFor(t, 10*time.Second, "the victim's states copied to their heirs", func() bool {
		return tc.nodes[0].Limiter().ReplicaStats().Held+tc.nodes[1].Limiter().ReplicaStats().Held >= int64(len(ks))
	})
	victim.Inject(node.FaultCrash)
	clients := []*client.Client{c0, newClient(t, tc.nodes[1].GRPCAddr())}
	admitted := map[string]int{}
	check := func(n int) {
		for _, k := range ks {
			for _, c := range clients {
				for range n {
					res, err := c.Check(context.Background(), client.Item{Key: k, Limit: lim, Cost: 1})
					if err != nil || res[0].Err != nil {
						t.Fatalf("check %s: %+v %v", k, res, err)
					}
					if res[0].Allowed {
						admitted[k]++
					}
				}
			}
		}
	}
	check(30) // the victim is still in the rings: its heir acts
	tc.nodes = tc.nodes[:2]
	tc.waitConverged()
	check(10) // the heir owns the keys
	for _, k := range ks {
		if admitted[k] != 40 {
			t.Errorf("%s admitted %d after its owner was killed at 60 of 100, want 40", k, admitted[k])
		}
	}
}
