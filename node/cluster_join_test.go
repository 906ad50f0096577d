package node_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// Two nodes joining one right after the other, then leaving together,
// keep every counter. Known to fail about 1 run in 4 (and on the commits
// before this test): a node that joins computes where its new partitions'
// state is from the ring without itself, which names the other newcomer
// for some of them; it fetches from that newcomer, finds nothing, and the
// key starts afresh until the real previous owner's handoff merges in.
// The e2e Scale test hits a related loss on the way down about 1 run in 6.
func TestClusterTwoJoinThenLeave(t *testing.T) {
	t.Skip("known bug: concurrent joins can start a key afresh; see the comment")
	tc := newTestCluster(t, 3)
	lim := client.Limit{Limit: 100, Period: time.Hour}
	ks := keys(30)
	spend(t, newClient(t, tc.nodes[0].GRPCAddr()), ks, lim)
	tc.add("n3")
	tc.add("n4") // before n3's handoffs have arrived
	tc.waitConverged()
	c := newClient(t, tc.nodes[1].GRPCAddr())
	for _, k := range ks {
		if res := ownerOf(t, c, k, lim); res.Remaining != 40 {
			t.Fatalf("after scale up: %s on %s remaining %d", k, res.Owner, res.Remaining)
		}
	}
	var wg sync.WaitGroup
	for _, name := range []string{"n3", "n4"} {
		wg.Add(1)
		go func() { defer wg.Done(); tc.stops[name]() }()
	}
	wg.Wait()
	tc.nodes = tc.nodes[:3]
	tc.waitConverged()
	for _, k := range ks {
		if res := ownerOf(t, c, k, lim); res.Remaining != 40 {
			t.Errorf("after scale down: %s on %s remaining %d", k, res.Owner, res.Remaining)
		}
	}
}
