package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
)

// What nodes admit in fallback while a key's owner is isolated is
// reported to the owner once it is healed (Reconcile), so its count
// reflects it: never below empty for a token bucket, counted once even
// when an answer is lost, nothing for a fail-closed limit.
func TestFallbackReconciled(t *testing.T) {
	type check struct {
		on   string
		n    int // checks of cost 1
		want int // allowed
	}
	cases := []struct {
		name      string
		lim       bucket.Limit
		mode      policy.FailureMode
		before    int64 // spent on the owner first
		checks    []check
		lose      bool  // the first report's answer is lost (applied, not known to be)
		remaining int64 // on the owner after the reports
	}{
		{"local share, token bucket", tb(30, time.Hour), policy.FailLocal, 5,
			[]check{{"n1", 15, 10}, {"n2", 4, 4}}, false, 30 - 5 - 10 - 4},
		{"never below empty", tb(30, time.Hour), policy.FailLocal, 25,
			[]check{{"n1", 10, 10}, {"n2", 10, 10}}, false, 0},
		{"sliding window", bucket.Limit{Algorithm: bucket.SlidingWindow, Limit: 30, Period: time.Hour}, policy.FailLocal, 5,
			[]check{{"n1", 3, 3}, {"n2", 2, 2}}, false, 30 - 5 - 3 - 2},
		{"fail open", tb(30, time.Hour), policy.FailAllow, 0,
			[]check{{"n1", 12, 12}}, false, 30 - 12},
		{"fail closed admits nothing to report", tb(30, time.Hour), policy.FailDeny, 0,
			[]check{{"n1", 5, 0}}, false, 30},
		{"a lost answer is not reported twice", tb(30, time.Hour), policy.FailLocal, 0,
			[]check{{"n1", 7, 7}}, true, 30 - 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := limitertest.NewCluster(t, noReplicas, "n0", "n1", "n2")
			ctx := context.Background()
			key := c.KeysOwnedBy("n1", "n0", "rec", limiter.Request{Limit: tc.lim}, 1)[0]
			req := limiter.Request{Key: key, Limit: tc.lim, FailureMode: tc.mode, Cost: 1}
			if tc.before > 0 {
				spend := req
				spend.Cost = tc.before
				if res := c.Check("n0", spend)[0]; !res.Allowed {
					t.Fatalf("owner spend: %+v", res)
				}
			}
			c.Net.Isolate("n0")
			for _, ch := range tc.checks {
				allowed := 0
				for range ch.n {
					res := c.Check(ch.on, req)[0]
					if res.Source != limiter.SourceFallback {
						t.Fatalf("check on %s: %+v, want a fallback", ch.on, res)
					}
					if res.Allowed {
						allowed++
					}
				}
				if allowed != ch.want {
					t.Fatalf("%s: %d of %d allowed in fallback, want %d", ch.on, allowed, ch.n, ch.want)
				}
			}
			// Still isolated: nothing is reported, nothing is lost.
			for _, ch := range tc.checks {
				pending := c.Node(ch.on).PendingReports()
				if got := c.Node(ch.on).Reconcile(ctx); got != 0 || c.Node(ch.on).PendingReports() != pending {
					t.Fatalf("%s reported %d to an isolated owner (pending %d -> %d)", ch.on, got, pending, c.Node(ch.on).PendingReports())
				}
			}
			c.Net.Heal()
			if tc.lose {
				c.Net.LoseAnswers(tc.checks[0].on, "n0", nil)
			}
			for _, ch := range tc.checks {
				c.Node(ch.on).Reconcile(ctx)
			}
			c.Net.Heal()
			for _, ch := range tc.checks {
				c.Node(ch.on).Reconcile(ctx) // nothing left, or nothing twice
				if p := c.Node(ch.on).PendingReports(); p != 0 {
					t.Fatalf("%s: %d keys still pending", ch.on, p)
				}
			}
			read := req
			read.Cost = 0
			if res := c.Check("n1", read)[0]; res.Source != limiter.SourceOwner || res.Remaining != tc.remaining {
				t.Fatalf("owner after the reports: %+v, want %d remaining", res, tc.remaining)
			}
		})
	}
}

// At most ReportKeys keys wait for a report; the oldest are dropped.
func TestFallbackReportsBounded(t *testing.T) {
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.ReportKeys = 2 }, "n0", "n1", "n2")
	lim := tb(30, time.Hour)
	ks := c.KeysOwnedBy("n1", "n0", "cap", limiter.Request{Limit: lim}, 3)
	c.Net.Isolate("n0")
	for _, k := range ks {
		if res := c.Check("n1", limiter.Request{Key: k, Limit: lim, Cost: 2})[0]; !res.Allowed || res.Source != limiter.SourceFallback {
			t.Fatalf("%s: %+v", k, res)
		}
	}
	if p := c.Node("n1").PendingReports(); p != 2 {
		t.Fatalf("%d keys pending, want the cap 2", p)
	}
	c.Net.Heal()
	if got := c.Node("n1").Reconcile(context.Background()); got != 2 {
		t.Fatalf("reported %d keys, want 2", got)
	}
	for i, want := range []int64{30, 28, 28} { // the oldest was dropped
		if res := c.Check("n1", limiter.Request{Key: ks[i], Limit: lim})[0]; res.Remaining != want {
			t.Fatalf("%s: %+v, want %d remaining", ks[i], res, want)
		}
	}
}
