package node_test

import (
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
