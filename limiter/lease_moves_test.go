package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// conc3 is a concurrency cap of 3 leases.
var conc3 = bucket.Limit{Algorithm: bucket.Concurrency, Limit: 3}

// acquireN takes n leases of key's conc3 through node on, each allowed.
func acquireN(t *testing.T, c *limitertest.Cluster, on, key string, n int) {
	t.Helper()
	for i := range n {
		lease, err := c.Node(on).Acquire(context.Background(), limiter.AcquireRequest{Request: limiter.Request{Key: key, Limit: conc3, Cost: 1}})
		if err != nil || lease.Err != nil || !lease.Allowed {
			t.Fatalf("lease %d of %s through %s: %v %+v, want allowed", i, key, on, err, lease)
		}
	}
}

// A leaving node takes no lease on a key it does not hold, as it decides
// no check (TestLeavingNodeFetchesNothingBack): n1 owns the key, whose 3
// leases are all out, and n0 has left its own ring. Asked with its hops
// spent, n0 answers that the state is elsewhere (the sender falls back to
// its share); asked with hops to spare, it sends the lease on to n1, which
// refuses it. Taking it on its own empty store, as it did, a fourth lease
// was given beside the three.
func TestLeavingNodeTakesNoLeaseOnAKeyItLacks(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	k := c.KeysOwnedBy("n1", "n1", "jobs", limiter.Request{Limit: conc3}, 1)[0]
	acquireN(t, c, "n1", k, 3)
	c.SetRing("n0", "n1", "n2") // n0 is leaving
	item := limiter.Forwarded{Hash: identity.Inline(uint8(conc3.Algorithm), conc3.Period, k), Limit: conc3, Cost: 1}
	for _, tc := range []struct {
		hops      int
		elsewhere bool
	}{{8, true}, {1, false}} {
		a, id, err := c.Node("n0").AcquireForwarded(context.Background(), "n2", tc.hops, item, limiter.DefaultLeaseTTL)
		if err != nil {
			t.Fatalf("hops %d: n0: AcquireForwarded: %v", tc.hops, err)
		}
		if a.Allowed || !id.IsZero() || errors.Is(a.Err, limiter.ErrStateElsewhere) != tc.elsewhere {
			t.Errorf("hops %d: n0, leaving, took a lease of %s for n2: %+v %v, want refused (state elsewhere: %v)", tc.hops, k, a, id, tc.elsewhere)
		}
	}
	if got := c.Net.Calls("n0", "n1").Fetch; got != 0 {
		t.Errorf("n0, leaving, fetched %s from its owner n1 %d times, want 0", k, got)
	}
	if got := c.Net.Calls("n0", "n1").Acquire; got != 1 {
		t.Errorf("n0 sent %d leases on to n1, want 1 (the one with hops to spare)", got)
	}
	res := c.Check("n1", limiter.Request{Key: k, Limit: conc3})[0]
	if res.Remaining != 0 {
		t.Errorf("%s on n1 after: %+v, want 0 free (3 leases out)", k, res)
	}
}

// A lease on a key fetched away between its route and its take is taken
// by the node that fetched it, as a check is
// (TestKeyFetchedAwayBeforeItsTakeIsDecidedByTheFetcher). n0 owns the key
// by its ring and has 2 of its 3 leases out; n1, whose ring gives it the
// key, fetches it and takes the third while a lease through n0 is between
// its route and its take. Taken on n0's emptied store, it was a fourth.
func TestLeaseOnAKeyFetchedAwayIsTakenByTheFetcher(t *testing.T) {
	calc := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	calc.SetRing("n0", "n0", "n1")
	var k string
	for i := 0; k == "" && i < 200000; i++ {
		req := limiter.Request{Key: fmt.Sprintf("jobs:%d", i), Limit: conc3}
		if calc.Owner("n0", req) == "n0" && calc.Owner("n1", req) == "n1" {
			k = req.Key
		}
	}
	if k == "" {
		t.Fatal("no key owned by n0 on {n0, n1} and by n1 on {n0, n1, n2}")
	}

	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	c.SetRing("n0", "n0", "n1")
	c.SetRing("n1", "n0", "n1")
	acquireN(t, c, "n0", k, 2)
	c.SetRing("n1", "n0", "n1", "n2")
	n0 := c.Node("n0")
	var once sync.Once
	limiter.SetBeforeTake(func(l *limiter.Limiter) {
		if l != n0 {
			return
		}
		once.Do(func() { acquireN(t, c, "n1", k, 1) })
	})
	defer limiter.SetBeforeTake(nil)
	lease, err := n0.Acquire(context.Background(), limiter.AcquireRequest{Request: limiter.Request{Key: k, Limit: conc3, Cost: 1}})
	if err != nil || lease.Allowed || lease.Owner != "n1" {
		t.Errorf("a fourth lease of %s through n0 while n1 fetched it: %v %+v, want refused by n1", k, err, lease)
	}
}
