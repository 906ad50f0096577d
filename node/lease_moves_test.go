package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// leasedKeys takes the whole cap of leaseLimit on each key of ks through
// c and returns the leases by key.
func leasedKeys(t *testing.T, c *client.Client, ks []string) map[string][]client.Lease {
	t.Helper()
	held := map[string][]client.Lease{}
	for _, k := range ks {
		for range leaseLimit.Limit {
			held[k] = append(held[k], acquireOK(t, c, k))
		}
	}
	return held
}

// checkLeasesHeld asserts, through c, that each key's cap is still taken by
// the leases in held (one more acquire is denied), that each lease is
// released once, and that a released unit can be taken again.
func checkLeasesHeld(t *testing.T, c *client.Client, held map[string][]client.Lease, moved string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for k, ls := range held {
		l, err := c.Acquire(ctx, k, "", leaseLimit, 1, time.Hour)
		if err != nil {
			t.Fatalf("%s: acquire after the move: %v", k, err)
		}
		if l.Allowed {
			t.Fatalf("%s (now on %s): acquire granted past the cap of %d held before %s moved it", k, l.Owner, leaseLimit.Limit, moved)
		}
		for i, l := range ls {
			if !release(t, c, l) {
				t.Fatalf("%s: lease %d taken before %s was not found after it", k, i, moved)
			}
			if release(t, c, l) {
				t.Fatalf("%s: lease %d released twice", k, i)
			}
		}
		acquireOK(t, c, k)
	}
}

// Leases live in the key's state, so a graceful leave moves them with it:
// on the new owner the cap is still taken, and each lease is found there and
// released once.
func TestClusterLeaveMovesLeases(t *testing.T) {
	tc := newTestCluster(t, 3)
	c0 := newClient(t, tc.nodes[0].GRPCAddr())
	leaving := tc.nodes[2].Name()
	var ks []string
	for _, k := range keys(60) {
		if ownerOf(t, c0, k, leaseLimit).Owner == leaving {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		t.Fatalf("%s owns none of the keys", leaving)
	}
	held := leasedKeys(t, c0, ks)
	tc.stop(leaving)
	checkLeasesHeld(t, newClient(t, tc.nodes[1].GRPCAddr()), held, "the leave of "+leaving)
}

// A node that joins takes the keys it now owns with their leases.
func TestClusterJoinMovesLeases(t *testing.T) {
	tc := newTestCluster(t, 3)
	c0 := newClient(t, tc.nodes[0].GRPCAddr())
	ks := keys(60)
	held := leasedKeys(t, c0, ks)
	joined := tc.add("n3")
	tc.waitConverged()
	c3 := newClient(t, joined.GRPCAddr())
	taken := 0
	for _, k := range ks {
		if ownerOf(t, c3, k, leaseLimit).Owner == joined.Name() {
			taken++
		}
	}
	if taken == 0 {
		t.Fatalf("%s took none of %d keys", joined.Name(), len(ks))
	}
	checkLeasesHeld(t, c3, held, "the join of "+joined.Name())
}
