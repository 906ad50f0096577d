package limiter_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
)

// Checks answered from node-side grants never admit more than the bucket
// allows: the owner spends granted tokens at once, so over any stretch the
// cluster admits at most the burst plus what refills meanwhile, and at
// least that minus the tokens nodes hold unspent (each at most
// capacity/(2 × nodes)).
func TestGrantsNeverOvershoot(t *testing.T) {
	for _, mode := range []policy.GrantMode{policy.GrantAlways, policy.GrantAuto} {
		t.Run(mode.String(), func(t *testing.T) {
			set, err := policy.NewSet(false, policy.Policy{Name: "hot", Limit: tb(120, time.Hour), Grants: mode})
			if err != nil {
				t.Fatal(err)
			}
			ns := names(3)
			c := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.Policies = set }, ns...)
			key := c.KeysOwnedBy("n0", "n0", "hot", limiter.Request{Policy: "hot"}, 1)[0]
			most := int64(120 / (2 * len(ns)))
			// burst: what the owner can give in each round; the second
			// round starts half an hour later, with 60 tokens refilled
			// and the first round's grants lapsed.
			for round, burst := range []int64{120, 60} {
				var allowed, granted atomic.Int64
				var wg sync.WaitGroup
				for _, n := range ns {
					for range 3 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for range 80 {
								res, err := c.Node(n).Check(context.Background(), []limiter.Request{{Key: key, Policy: "hot", Cost: 1}}, nil)
								if err != nil || res[0].Err != nil {
									t.Errorf("check on %s: %v %+v", n, err, res)
									return
								}
								if res[0].Allowed {
									allowed.Add(1)
								}
								if res[0].Source == limiter.SourceGrant {
									granted.Add(1)
								}
							}
						}()
					}
				}
				wg.Wait()
				got := allowed.Load()
				if got > burst || got < burst-2*most {
					t.Errorf("step %d: %d of 720 checks allowed, want between %d and %d", round, got, burst-2*most, burst)
				}
				if granted.Load() == 0 {
					t.Errorf("step %d: no check was answered from a grant", round)
				}
				c.Clock.Advance(30 * time.Minute)
			}
			var local uint64
			for _, n := range ns[1:] {
				local += c.Node(n).GrantStats().Local
			}
			if local == 0 {
				t.Fatalf("grant stats count no local answers")
			}
		})
	}
}

// Grants asked for on behalf of clients (Limiter.Grant) come from the
// owner's bucket too: together they never exceed it.
func TestGrantsForClientsNeverOvershoot(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	lim := tb(100, time.Hour)
	key := c.KeysOwnedBy("n0", "n0", "client", limiter.Request{Limit: lim}, 1)[0]
	var total int64
	for i := 0; i < 30; i++ {
		on := []string{"n1", "n2", "n0"}[i%3]
		got, res, err := c.Node(on).Grant(context.Background(), limiter.Request{Key: key, Limit: lim}, 7)
		if err != nil || res.Source != limiter.SourceOwner {
			t.Fatalf("step %d: grant on %s: %+v %+v %v", i, on, got, res, err)
		}
		total += got.Tokens
	}
	if total != 100 {
		t.Fatalf("granted %d in total, want the bucket's 100 exactly", total)
	}
	if res := c.Check("n1", limiter.Request{Key: key, Limit: lim})[0]; res.Remaining != 0 {
		t.Fatalf("owner's bucket after the grants: %+v, want 0 remaining", res)
	}
}
