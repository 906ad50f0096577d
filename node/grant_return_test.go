package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// A graceful move keeps a key's exact count though a node held a grant
// of it: 60 used of 100 (50 and 10, from grants of n0, which does not own
// the key) leaves 40 on the new owner, not 100 - 50 - the grant. Keys that
// stay keep their grants held (34 until they lapse); keys n0 owns never
// took one.
func TestGrantReturnedWhenKeyMoves(t *testing.T) {
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	grants := func(c *node.Config) { c.Grants.Threshold, c.Grants.Refill = 1, time.Hour }
	for i := range 3 {
		tc.addWith(fmt.Sprintf("n%d", i), grants)
	}
	tc.waitConverged()
	lim := client.Limit{Limit: 100, Period: time.Hour}
	c := newClient(t, tc.nodes[0].GRPCAddr()) // every check goes through n0
	ks := keys(60)
	before := map[string]string{}
	for _, k := range ks {
		for _, cost := range []int64{50, 10} {
			res, err := c.Check(context.Background(), client.Item{Key: k, Limit: lim, Cost: cost})
			if err != nil || !res[0].Allowed {
				t.Fatalf("check %s cost %d: %+v %v", k, cost, res, err)
			}
		}
		before[k] = ownerOf(t, c, k, lim).Owner
	}
	held := 0
	for _, k := range ks {
		if r := ownerOf(t, c, k, lim); before[k] != "n0" {
			if r.Remaining != 34 {
				t.Fatalf("%s on %s: %d remaining, want 34 (60 used, a grant of 16 of which 6 unspent held by n0)", k, r.Owner, r.Remaining)
			}
			held++
		}
	}
	if held == 0 {
		t.Fatal("n0 holds no grant")
	}
	joined := tc.addWith("n3", grants)
	tc.waitConverged()
	moved := 0
	for _, k := range ks {
		want := int64(40)
		if before[k] != "n0" && ownerOf(t, c, k, lim).Owner != joined.Name() {
			want = 34 // the key stays: so does n0's grant
		}
		deadline := time.Now().Add(10 * time.Second)
		for r := ownerOf(t, c, k, lim); r.Remaining != want; r = ownerOf(t, c, k, lim) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (owner %s, then %s): %d remaining, want %d; n0 grant stats %+v", k, before[k], r.Owner, r.Remaining, want, tc.nodes[0].Limiter().GrantStats())
			}
			time.Sleep(10 * time.Millisecond) // polling the condition, with a deadline
		}
		if r := ownerOf(t, c, k, lim); r.Owner == joined.Name() && before[k] != "n0" {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key with a grant moved to n3")
	}
	if s := tc.nodes[0].Limiter().GrantStats(); s.Returned != uint64(6*moved) || s.ReturnFailures != 0 {
		t.Fatalf("n0 grant stats %+v, want %d returned (6 of each of %d moved keys)", s, 6*moved, moved)
	}
}

// A client's Close gives its unspent grant tokens back: 60 used of 100
// leaves 40.
func TestClientCloseReturnsGrants(t *testing.T) {
	tc := newTestCluster(t, 3)
	addrs := []string{tc.nodes[0].GRPCAddr(), tc.nodes[1].GRPCAddr(), tc.nodes[2].GRPCAddr()}
	lim := client.Limit{Limit: 100, Period: time.Hour}
	plain := newClient(t, addrs...)
	if res, err := plain.Check(context.Background(), client.Item{Key: "closing", Limit: lim, Cost: 50}); err != nil || !res[0].Allowed {
		t.Fatalf("check 50: %+v %v", res, err)
	}
	gc, err := client.New(client.Config{Addrs: addrs, Timeout: 10 * time.Second,
		Grants: &client.GrantOptions{Threshold: 1, Refill: time.Hour, MaxShare: 0.25}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := gc.Check(context.Background(), client.Item{Key: "closing", Limit: lim, Cost: 10})
	if err != nil || !res[0].Allowed || res[0].Source != "grant" {
		t.Fatalf("check 10 with grants: %+v %v, want allowed from a grant", res, err)
	}
	if r := ownerOf(t, plain, "closing", lim); r.Remaining != 25 {
		t.Fatalf("before Close: %d remaining, want 25 (a grant of 25, 15 unspent)", r.Remaining)
	}
	if err := gc.Close(); err != nil {
		t.Fatal(err)
	}
	if s := gc.GrantStats(); s.Returned != 15 || s.ReturnFailures != 0 {
		t.Fatalf("client grant stats %+v, want 15 returned", s)
	}
	if r := ownerOf(t, plain, "closing", lim); r.Remaining != 40 {
		t.Fatalf("after Close: %d remaining on %s, want 40 (60 used of 100)", r.Remaining, r.Owner)
	}
}

// A node that shuts down gracefully gives back the grants it holds: 60
// used of 100 leaves 40 on the owners.
func TestGrantReturnedOnShutdown(t *testing.T) {
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	grants := func(c *node.Config) { c.Grants.Threshold, c.Grants.Refill = 1, time.Hour }
	for i := range 3 {
		tc.addWith(fmt.Sprintf("n%d", i), grants)
	}
	tc.waitConverged()
	lim := client.Limit{Limit: 100, Period: time.Hour}
	holder := tc.nodes[2]
	c := newClient(t, holder.GRPCAddr())
	ks := keysOwnedBy(t, c, tc.nodes[0].Name(), "bye", 5, lim)
	for _, k := range ks {
		for _, cost := range []int64{50, 10} {
			if res, err := c.Check(context.Background(), client.Item{Key: k, Limit: lim, Cost: cost}); err != nil || !res[0].Allowed {
				t.Fatalf("check %s cost %d: %+v %v", k, cost, res, err)
			}
		}
		if r := ownerOf(t, c, k, lim); r.Remaining != 34 {
			t.Fatalf("%s: %d remaining, want 34 (a grant of 16, 6 unspent on %s)", k, r.Remaining, holder.Name())
		}
	}
	tc.stop(holder.Name())
	other := newClient(t, tc.nodes[1].GRPCAddr())
	for _, k := range ks {
		if r := ownerOf(t, other, k, lim); r.Remaining != 40 {
			t.Fatalf("%s after %s left: %d remaining on %s, want 40", k, holder.Name(), r.Remaining, r.Owner)
		}
	}
}
