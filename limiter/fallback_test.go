package limiter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
)

// When a key's owner cannot be reached, the limit's failure mode answers
// (fallback.go): a local share of limit/N (local), a denial (deny), or an
// unlimited allow (allow), with Source fallback and Owner naming the owner.
// The owner's own count is untouched and rules again once it is back.
func TestFallbackModes(t *testing.T) {
	const checker, owner = "n1", "n0"
	faults := []struct {
		name   string
		inject func(n *limitertest.Network)
	}{
		{"link cut", func(n *limitertest.Network) { n.Cut(checker, owner) }},
		{"link cut one way", func(n *limitertest.Network) { n.CutOneWay(checker, owner) }},
		{"owner isolated", func(n *limitertest.Network) { n.Isolate(owner) }},
		{"calls to the owner dropped", func(n *limitertest.Network) { n.Drop(limitertest.Any, owner, 1) }},
	}
	modes := []struct {
		mode      policy.FailureMode
		allowed   int           // of 15 checks of cost 1
		remaining int64         // of the last one
		retry     time.Duration // of the last one
	}{
		{policy.FailLocal, 10, 0, 0}, // LocalShare(30/h, 3 nodes) = 10
		{policy.FailDeny, 0, 0, limiter.FallbackRetryAfter},
		{policy.FailAllow, 15, 30, 0},
	}
	c := limitertest.NewCluster(t, noReplicas, "n0", "n1", "n2")
	lim := tb(30, time.Hour)
	ks := c.KeysOwnedBy(checker, owner, "fb", limiter.Request{Limit: lim}, len(faults)*len(modes))
	step := 0
	for _, f := range faults {
		for _, m := range modes {
			key := ks[step]
			req := limiter.Request{Key: key, Limit: lim, FailureMode: m.mode, Cost: 1}
			c.Check(owner, limiter.Request{Key: key, Limit: lim, Cost: 5}) // the owner's own count
			c.Net.Heal()
			f.inject(c.Net)
			allowed := 0
			var last limiter.Result
			for i := 0; i < 15; i++ {
				last = c.Check(checker, req)[0]
				if last.Source != limiter.SourceFallback || last.Owner != owner || last.Err != nil {
					t.Fatalf("step %d (%s, %s): check %d: %+v, want a fallback for %s", step, f.name, m.mode, i, last, owner)
				}
				if last.Allowed {
					allowed++
				}
			}
			if allowed != m.allowed || last.Remaining != m.remaining || (m.retry > 0 && last.RetryAfter != m.retry) {
				t.Errorf("step %d (%s, %s): %d allowed, last %+v; want %d allowed, remaining %d, retry %s",
					step, f.name, m.mode, allowed, last.Result, m.allowed, m.remaining, m.retry)
			}
			read := c.Check(checker, limiter.Request{Key: key, Limit: lim, FailureMode: m.mode})[0]
			if !read.Allowed {
				t.Errorf("step %d (%s, %s): a read (cost 0) is denied: %+v", step, f.name, m.mode, read)
			}
			c.Net.Heal()
			if res := c.Check(checker, limiter.Request{Key: key, Limit: lim})[0]; res.Source != limiter.SourceOwner || res.Remaining != 25 {
				t.Errorf("step %d (%s, %s): after heal %+v, want the owner's 25 remaining", step, f.name, m.mode, res)
			}
			step++
		}
	}
}

// Under the local failure mode a cost larger than the local share is
// denied outright, and a concurrency lease lives in the local share, with
// an ID Release recognises.
func TestFallbackLocalShareBounds(t *testing.T) {
	c := limitertest.NewCluster(t, noReplicas, "n0", "n1", "n2")
	ctx := context.Background()
	lim := tb(30, time.Hour)
	key := c.KeysOwnedBy("n1", "n0", "share", limiter.Request{Limit: lim}, 1)[0]
	c.Net.Isolate("n0")
	if res := c.Check("n1", limiter.Request{Key: key, Limit: lim, Cost: 11})[0]; res.Allowed || res.RetryAfter != limiter.FallbackRetryAfter || res.Limit != 10 {
		t.Fatalf("cost 11 over a share of 10: %+v, want denied, retry %s, limit 10", res, limiter.FallbackRetryAfter)
	}
	conc := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 6}
	ckey := c.KeysOwnedBy("n1", "n0", "jobs", limiter.Request{Limit: conc}, 1)[0]
	creq := limiter.Request{Key: ckey, Limit: conc, Cost: 1}
	var ids []string
	for i := 0; i < 3; i++ {
		lease, err := c.Node("n1").Acquire(ctx, limiter.AcquireRequest{Request: creq})
		if err != nil || lease.Source != limiter.SourceFallback {
			t.Fatalf("step %d: acquire: %v %+v", i, err, lease)
		}
		if lease.Allowed != (i < 2) { // LocalShare(6, 3) = 2
			t.Fatalf("step %d: acquire allowed=%v, want %v", i, lease.Allowed, i < 2)
		}
		if lease.Allowed {
			if !strings.HasPrefix(lease.ID, "local-") {
				t.Fatalf("step %d: fallback lease ID %q, want local-...", i, lease.ID)
			}
			ids = append(ids, lease.ID)
		}
	}
	for i, id := range ids {
		ok, res, err := c.Node("n1").Release(ctx, limiter.ReleaseRequest{Request: limiter.Request{Key: ckey, Limit: conc}, LeaseID: id})
		if err != nil || !ok || res.Source != limiter.SourceFallback {
			t.Fatalf("step %d: release %s: %v %v %+v", i, id, ok, err, res)
		}
	}
}

// A caller whose context ends while its owner is slow gets the context's
// error, not a fallback: the owner did not fail, the caller gave up.
func TestFallbackNotForTheCallersDeadline(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1")
	lim := tb(30, time.Hour)
	key := c.KeysOwnedBy("n1", "n0", "slow", limiter.Request{Limit: lim}, 1)[0]
	c.Net.Delay("n1", "n0", time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res, err := c.Node("n1").Check(ctx, []limiter.Request{{Key: key, Limit: lim, Cost: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Allowed || r.Source != limiter.SourceOwner || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Fatalf("check past the caller's deadline: %+v, want the deadline error from the owner's source", r)
	}
}

// A caller that marks its context FallBackBeforeDeadline gets the failure
// mode's answer before its deadline when the owner is slow.
func TestFallBackBeforeDeadline(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1")
	lim := tb(30, time.Hour)
	key := c.KeysOwnedBy("n1", "n0", "slow", limiter.Request{Limit: lim}, 1)[0]
	c.Net.Delay("n1", "n0", time.Hour)
	// A 1 s deadline keeps the largest reserve (50 ms) for the local share:
	// a 50 ms deadline left 5 ms, which a loaded machine overran.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	dl, _ := ctx.Deadline()
	res, err := c.Node("n1").Check(limiter.FallBackBeforeDeadline(ctx), []limiter.Request{{Key: key, Limit: lim, Cost: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; !r.Allowed || r.Source != limiter.SourceFallback || r.Err != nil {
		t.Fatalf("check with a slow owner: %+v, want a local-share answer", r)
	}
	if late := time.Since(dl); late > 0 {
		t.Fatalf("answered %v after the caller's deadline", late)
	}
}
