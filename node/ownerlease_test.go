package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// A node cut off from the majority of the group of the ring's epochs
// (FaultRaftCut: its Raft messages are lost, while gossip and its gRPC
// ports work, so its peers still reach it) stops deciding its keys as
// owner once its lease has run out, within the election timeout plus the
// lease duration of the cut: its own callers' checks and those its peers
// forward to it are answered from the limit's failure mode. The nodes of
// the majority go on deciding theirs, and once healed the node decides
// its keys again. The nodes run on the real clock (the lease's).
func TestOwnerLeaseCutOffNodeStopsDeciding(t *testing.T) {
	tc := newTestCluster0(t, 3, func(c *node.Config) { c.Clock = time.Now; c.Replicas = 0 })
	cut, other := tc.nodes[2], tc.nodes[0]
	onCut, onOther := newClient(t, cut.GRPCAddr()), newClient(t, other.GRPCAddr())
	lim := client.Limit{Limit: 1_000_000, Period: time.Hour, FailureMode: client.FailLocal}
	key := keysOwnedBy(t, onCut, cut.Name(), "cut", 1, lim)[0]
	otherKey := keysOwnedBy(t, onOther, other.Name(), "other", 1, lim)[0]
	check := func(c *client.Client, key string) client.Result {
		t.Helper()
		res, err := c.Check(context.Background(), client.Item{Key: key, Limit: lim, Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil {
			t.Fatalf("check %s: %v", key, res[0].Err)
		}
		return res[0]
	}
	waitFor(t, 10*time.Second, "the owner's answer with its lease held", func() bool {
		return check(onCut, key).Source == "owner" && check(onOther, key).Source == "owner"
	})
	if got := sample(scrape(t, cut), `sluice_owner_refused_total{reason="no_lease"}`); got != "0" {
		t.Fatalf("owner_refused_total{no_lease} = %q before the cut, want 0", got)
	}

	bound := node.EpochLeaseBound(cut)
	start := time.Now()
	cut.Inject(node.FaultRaftCut)
	// The margin covers a loaded machine: two cores shared with other
	// test processes, the race detector.
	waitFor(t, bound+3*time.Second, "the cut-off node's own key answered from the failure mode", func() bool {
		return check(onCut, key).Source == "fallback"
	})
	t.Logf("the cut-off node stopped deciding %v after the cut (lease bound %v)", time.Since(start).Round(time.Millisecond), bound)
	for i := range 5 {
		if r := check(onCut, key); r.Source != "fallback" || !r.Allowed {
			t.Fatalf("check %d on the cut-off node: %+v, want the failure mode's answer", i, r)
		}
		if r := check(onOther, key); r.Source != "fallback" || r.Owner != cut.Name() || !r.Allowed {
			t.Fatalf("check %d forwarded to the cut-off node: %+v, want the failure mode's answer", i, r)
		}
	}
	if got := sample(scrape(t, cut), `sluice_owner_refused_total{reason="no_lease"}`); got == "0" || got == "" {
		t.Errorf("owner_refused_total{no_lease} = %q after the cut, want some", got)
	}
	if r := check(onOther, otherKey); r.Source != "owner" {
		t.Errorf("a key of the majority's node: %+v, want its owner's answer", r)
	}

	cut.Inject(node.FaultRaftHeal)
	waitFor(t, 15*time.Second, "the healed node decides its key again", func() bool {
		return check(onCut, key).Source == "owner"
	})
}

// After a kill -9 of a key's owner, the Dead epoch moves its partitions,
// and their new owner answers their keys from the failure mode (with
// replication off) until the dead wait has passed since it applied the
// epoch, then decides them as owner.
func TestOwnerLeaseDeadWaitAfterCrash(t *testing.T) {
	tc := newTestCluster0(t, 3, func(c *node.Config) { c.Replicas = 0 })
	victim := tc.nodes[2]
	clients := []*client.Client{newClient(t, tc.nodes[0].GRPCAddr()), newClient(t, tc.nodes[1].GRPCAddr())}
	lim := client.Limit{Limit: 1_000_000, Period: time.Hour, FailureMode: client.FailLocal}
	key := keysOwnedBy(t, clients[0], victim.Name(), "dead", 1, lim)[0]
	victim.Inject(node.FaultCrash)
	// Checks through both survivors, from the crash until the key's new
	// owner decides it: the dead wait falls between.
	var owner string
	waitFor(t, 30*time.Second, "the key decided by its new owner", func() bool {
		for _, c := range clients {
			res, err := c.Check(context.Background(), client.Item{Key: key, Limit: lim, Cost: 1})
			if err != nil || res[0].Err != nil || !res[0].Allowed {
				t.Fatalf("check %s: %+v %v", key, res, err)
			}
			if res[0].Source == "owner" {
				if res[0].Owner == victim.Name() {
					t.Fatalf("check %s after the crash: %+v, decided by the killed owner", key, res[0])
				}
				owner = res[0].Owner
				return true
			}
		}
		return false
	})
	var newOwner *node.Node
	for _, n := range tc.nodes[:2] {
		if n.Name() == owner {
			newOwner = n
		}
	}
	if got := sample(scrape(t, newOwner), `sluice_owner_refused_total{reason="dead_wait"}`); got == "0" || got == "" {
		t.Errorf("%s: owner_refused_total{dead_wait} = %q, want some: it decided the dead member's key before the dead wait", owner, got)
	}
}
