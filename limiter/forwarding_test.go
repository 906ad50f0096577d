package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// Checks of a key at any node are decided by its one owner: in total the
// cluster admits exactly the limit, whatever the algorithm and the node
// asked.
func TestForwardingAdmitsExactlyTheLimit(t *testing.T) {
	limits := []bucket.Limit{
		{Algorithm: bucket.TokenBucket, Limit: 10, Period: time.Hour},
		{Algorithm: bucket.FixedWindow, Limit: 10, Period: time.Hour},
		{Algorithm: bucket.SlidingWindow, Limit: 10, Period: time.Hour},
		{Algorithm: bucket.SlidingLog, Limit: 10, Period: time.Hour},
	}
	for _, size := range []int{1, 3, 5} {
		for _, lim := range limits {
			t.Run(fmt.Sprintf("%d nodes/%s", size, lim.Algorithm), func(t *testing.T) {
				ns := names(size)
				c := limitertest.NewCluster(t, nil, ns...)
				for step, k := range keys(20) {
					allowed := 0
					owners := map[string]bool{}
					for i := 0; i < 30; i++ {
						res := c.Check(ns[(step+i)%size], limiter.Request{Key: k, Limit: lim, Cost: 1})[0]
						if res.Err != nil || res.Source != limiter.SourceOwner {
							t.Fatalf("step %d: check %d of %s: %+v", step, i, k, res)
						}
						owners[res.Owner] = true
						if res.Allowed {
							allowed++
						}
					}
					if allowed != 10 || len(owners) != 1 {
						t.Fatalf("step %d: %s: %d allowed by owners %v, want 10 by one owner", step, k, allowed, owners)
					}
				}
			})
		}
	}
}

// Concurrent checks of one key from every node still admit exactly the
// limit.
func TestForwardingConcurrent(t *testing.T) {
	ns := names(3)
	c := limitertest.NewCluster(t, nil, ns...)
	lim := tb(50, time.Hour)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for _, n := range ns {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 20 {
					res, err := c.Node(n).Check(context.Background(), []limiter.Request{{Key: "hot", Limit: lim, Cost: 1}}, nil)
					if err != nil || res[0].Err != nil {
						t.Errorf("check on %s: %v %+v", n, err, res)
						return
					}
					if res[0].Allowed {
						allowed.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	if got := allowed.Load(); got != 50 {
		t.Fatalf("%d of 240 checks allowed, want exactly 50", got)
	}
}

// A node whose ring is stale forwards to the old owner, which forwards once
// more (hops) to the owner by its newer ring: one count.
func TestForwardingStaleRing(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	c.Add("n3")
	for _, n := range []string{"n1", "n2", "n3"} {
		c.SetRing(n, "n0", "n1", "n2", "n3")
	}
	lim := tb(10, time.Hour)
	// Keys n3 owns now, that n0 (still on the old ring) sends to n1 or n2.
	var ks []string
	for _, k := range c.KeysOwnedBy("n1", "n3", "stale", limiter.Request{Limit: lim}, 20) {
		if c.Owner("n0", limiter.Request{Key: k, Limit: lim}) != "n0" {
			ks = append(ks, k)
		}
	}
	if len(ks) < 5 {
		t.Fatalf("%d keys to test, want 5", len(ks))
	}
	for step, k := range ks {
		allowed := 0
		for i := 0; i < 20; i++ {
			on := []string{"n0", "n3"}[i%2]
			res := c.Check(on, limiter.Request{Key: k, Limit: lim, Cost: 1})[0]
			if res.Allowed {
				allowed++
			}
		}
		if allowed != 10 {
			t.Fatalf("step %d: %s: %d allowed, want exactly 10", step, k, allowed)
		}
	}
}

// Leases of a concurrency limit are taken on the owner from any node, and
// released from any other.
func TestForwardingLeases(t *testing.T) {
	ns := names(3)
	c := limitertest.NewCluster(t, nil, ns...)
	lim := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 4}
	ctx := context.Background()
	var leases []limiter.Lease
	for i := 0; i < 9; i++ {
		lease, err := c.Node(ns[i%3]).Acquire(ctx, limiter.AcquireRequest{Request: limiter.Request{Key: "jobs", Limit: lim, Cost: 1}})
		if err != nil || lease.Err != nil {
			t.Fatalf("step %d: acquire: %v %+v", i, err, lease)
		}
		if lease.Allowed != (i < 4) {
			t.Fatalf("step %d: acquire allowed=%v, want %v", i, lease.Allowed, i < 4)
		}
		if lease.Allowed {
			leases = append(leases, lease)
		}
	}
	for i, lease := range leases {
		ok, res, err := c.Node(ns[(i+1)%3]).Release(ctx, limiter.ReleaseRequest{Request: limiter.Request{Key: "jobs", Limit: lim}, LeaseID: lease.ID})
		if err != nil || !ok || res.Remaining != int64(i+1) {
			t.Fatalf("step %d: release: %v %v %+v, want released with %d free", i, ok, err, res, i+1)
		}
	}
}

// A forwarded check whose sender has given up (its deadline passed while
// the owner was slow, and the sender answered it by the failure mode) is
// not applied by the owner: applying it too would count it twice (once in
// the owner's bucket, once in the sender's fallback share), and a grant
// request applied so would spend tokens no holder has.
func TestForwardedAfterDeadlineNotApplied(t *testing.T) {
	ns := names(3)
	c := limitertest.NewCluster(t, nil, ns...)
	lim := tb(10, time.Hour)
	key := c.KeysOwnedBy("n0", "n1", "late", limiter.Request{Limit: lim}, 1)[0]
	hash := identity.Inline(uint8(lim.Algorithm), lim.Period, key)
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	items := []limiter.Forwarded{{Hash: hash, Limit: lim, Cost: 3}, {Hash: hash, Limit: lim, Cost: 2, UpTo: true}}
	out := make([]limiter.Answer, len(items))
	c.Node("n1").CheckForwarded(ctx, "n0", 0, items, out)
	for i, a := range out {
		if a.Allowed || a.Granted != 0 || !errors.Is(a.Err, context.DeadlineExceeded) {
			t.Errorf("answer %d = %+v, want not applied, with the deadline's error", i, a)
		}
	}
	res := c.Check("n0", limiter.Request{Key: key, Limit: lim, Cost: 0})[0]
	if res.Source != limiter.SourceOwner || res.Remaining != 10 {
		t.Fatalf("usage after the late checks = %+v, want 10 remaining at the owner", res)
	}
}

// A forwarded check whose answer did not come back (the sender's deadline
// passed while the owner was slow) may have been applied: when the
// sender's ring moves on meanwhile, it is not sent again to the key's new
// owner, which would fetch the state, with the check counted, and count it
// again (a fresh key's first 60 of 100 came back denied with 40
// remaining); the failure mode answers it, and the owner counted it once.
func TestForwardedAnswerLostNotResent(t *testing.T) {
	ns := names(3)
	c := limitertest.NewCluster(t, nil, ns...)
	lim := tb(100, time.Hour)
	key := c.KeysOwnedBy("n0", "n1", "lost", limiter.Request{Limit: lim}, 1)[0]
	// While n1 applies the check, n0 sees n1 leave.
	c.Net.LoseAnswers("n0", "n1", func() { c.SetRing("n0", "n0", "n2") })
	res := c.Check("n0", limiter.Request{Key: key, Limit: lim, Cost: 60})[0]
	if res.Source != limiter.SourceFallback || res.Owner != "n1" {
		t.Errorf("check whose answer was lost = %+v, want answered by the failure mode for owner n1", res)
	}
	c.Net.Heal()
	if got := c.Check("n1", limiter.Request{Key: key, Limit: lim, Cost: 0})[0]; got.Source != limiter.SourceOwner || got.Owner != "n1" || got.Remaining != 40 {
		t.Fatalf("usage at the owner = %+v, want 40 remaining at n1 (the check counted once)", got)
	}
	hash := identity.Inline(uint8(lim.Algorithm), lim.Period, key)
	for _, n := range []string{"n0", "n2"} {
		if c.Node(n).Store().Has(c.Clock.Now().UnixNano(), hash) {
			t.Errorf("%s holds the key's state, want none (the check went nowhere else)", n)
		}
	}
}
