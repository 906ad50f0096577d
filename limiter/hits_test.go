package limiter_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
)

// hits is the Envoy RLS counting: 50 an hour, every hit counted.
var hits = bucket.Limit{Algorithm: bucket.FixedWindowHits, Limit: 50, Period: time.Hour}

// TestHitsExactAcrossNodes: checks of one fixed_window_hits key from every
// node of a cluster admit exactly the limit, even with grants forced on
// (grants apply to token buckets only, so every check goes to the owner),
// and the owner counts the denied hits too.
func TestHitsExactAcrossNodes(t *testing.T) {
	set, err := policy.NewSet(true, policy.Policy{Name: "hits", Limit: hits, Grants: policy.GrantAlways})
	if err != nil {
		t.Fatal(err)
	}
	ns := names(3)
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.Policies = set }, ns...)
	for _, req := range []limiter.Request{{Policy: "hits"}, {Limit: hits}} {
		key := c.KeysOwnedBy("n0", "n0", "envoy", req, 1)[0]
		req.Key, req.Cost = key, 1
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for _, n := range ns {
			for range 2 {
				wg.Go(func() {
					for range 30 {
						res, err := c.Node(n).Check(context.Background(), []limiter.Request{req}, nil)
						if err != nil || res[0].Err != nil {
							t.Errorf("check on %s: %v %+v", n, err, res)
							return
						}
						if res[0].Source != limiter.SourceOwner {
							t.Errorf("check on %s answered by %s, want the owner", n, res[0].Source)
							return
						}
						if res[0].Allowed {
							allowed.Add(1)
						}
					}
				})
			}
		}
		wg.Wait()
		if got := allowed.Load(); got != hits.Limit {
			t.Errorf("%+v: %d of 180 allowed, want exactly %d", req, got, hits.Limit)
		}
		// All 180 hits were counted: a read is over the limit.
		read := req
		read.Cost = 0
		if res := c.Check("n1", read)[0]; res.Allowed || res.Remaining != 0 {
			t.Errorf("read after 180 hits: %+v, want over the limit", res)
		}
		for _, n := range ns[1:] {
			if st := c.Node(n).GrantStats(); st.Local != 0 {
				t.Errorf("%s answered %d hits checks from grants", n, st.Local)
			}
		}
	}
}

// TestHitsCostAboveLimit: a cost above the limit is counted and denied,
// not refused as invalid, locally and on a forwarded check; a limit of 0
// denies every hit.
func TestHitsCostAboveLimit(t *testing.T) {
	c := limitertest.NewCluster(t, nil, names(2)...)
	key := c.KeysOwnedBy("n0", "n1", "big", limiter.Request{Limit: hits}, 1)[0]
	for step, on := range []string{"n1", "n0"} {
		res := c.Check(on, limiter.Request{Key: key, Limit: hits, Cost: 1 << 40})[0]
		if res.Err != nil || res.Allowed || res.Remaining != 0 {
			t.Errorf("step %d: 2^40 hits on %s: %+v", step, on, res)
		}
	}
	zero := bucket.Limit{Algorithm: bucket.FixedWindowHits, Period: time.Second}
	if res := c.Check("n0", limiter.Request{Key: "z", Limit: zero, Cost: 1})[0]; res.Err != nil || res.Allowed {
		t.Errorf("a hit under a limit of 0: %+v", res)
	}
}

// TestHitsFallbackLocalShare: with the owner unreachable, a hits limit
// answers from the local share (the limit over the nodes), counting every
// hit as the owner would.
func TestHitsFallbackLocalShare(t *testing.T) {
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.FetchTimeout = 50 * time.Millisecond; cfg.Replicas = -1 }, names(2)...)
	ks := c.KeysOwnedBy("n0", "n1", "cut", limiter.Request{Limit: hits}, 2)
	key := ks[0]
	c.Net.Cut("n0", "n1")
	var allowed int
	for range 40 {
		res := c.Check("n0", limiter.Request{Key: key, Limit: hits, Cost: 1})[0]
		if res.Source != limiter.SourceFallback || res.Owner != "n1" {
			t.Fatalf("answer %+v, want a fallback for owner n1", res)
		}
		if res.Allowed {
			allowed++
		}
	}
	if want := int(hits.Limit) / 2; allowed != want {
		t.Errorf("%d of 40 allowed by the local share, want %d", allowed, want)
	}
	// A cost above the share is counted, not refused.
	if res := c.Check("n0", limiter.Request{Key: ks[1], Limit: hits, Cost: 100})[0]; res.Allowed || res.Err != nil ||
		res.Limit != hits.Limit/2 || res.Source != limiter.SourceFallback {
		t.Errorf("100 hits in the fallback: %+v", res)
	}
}

// TestTrustedInline: a policy file that forbids inline limits refuses them
// from callers, but not those marked Trusted (the node's RLS rules).
func TestTrustedInline(t *testing.T) {
	set, err := policy.NewSet(false)
	if err != nil {
		t.Fatal(err)
	}
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.Policies = set }, "n0")
	if _, err := c.Node("n0").Check(context.Background(), []limiter.Request{{Key: "k", Limit: hits, Cost: 1}}, nil); err == nil {
		t.Fatal("an inline limit was accepted with inline limits disabled")
	}
	if res := c.Check("n0", limiter.Request{Key: "k", Limit: hits, Cost: 1, Trusted: true})[0]; !res.Allowed {
		t.Fatalf("trusted inline limit: %+v", res)
	}
}
