package limiter_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
)

// An owner cut off without an error (its calls are held, as by a
// blackhole) costs each check its caller's deadline. Once the checker
// suspects it (SetSuspects), checks and leases of its keys are answered
// by their failure mode at once, without a call to it; when the suspicion
// ends, they go to the owner again, whose count was untouched.
func TestSuspectOwnerAnsweredByFallbackAtOnce(t *testing.T) {
	const checker, owner = "n1", "n0"
	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	lim := tb(30, time.Hour) // LocalShare(30/h, 3 nodes) = 10
	conc := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 3}
	key := c.KeysOwnedBy(checker, owner, "sus", limiter.Request{Limit: lim}, 1)[0]
	leaseKey := c.KeysOwnedBy(checker, owner, "lease", limiter.Request{Limit: conc}, 1)[0]
	req := limiter.Request{Key: key, Limit: lim, Cost: 1}
	c.Check(owner, limiter.Request{Key: key, Limit: lim, Cost: 5}) // the owner's own count

	c.Net.Delay(limitertest.Any, owner, time.Hour)
	check := func(ctx context.Context) limiter.Result {
		t.Helper()
		res, err := c.Node(checker).Check(ctx, []limiter.Request{req}, nil)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		return res[0]
	}

	// Without suspicion the check waits for the owner until its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	res := check(ctx)
	cancel()
	if !errors.Is(res.Err, context.DeadlineExceeded) {
		t.Fatalf("check of a held owner's key without suspicion: %+v, want the caller's deadline", res)
	}

	c.Node(checker).SetSuspects([]string{"n2", owner})
	if got := c.Node(checker).Suspects(); len(got) != 2 || !slices.Contains(got, owner) {
		t.Fatalf("Suspects() = %v", got)
	}
	before := c.Net.Calls(checker, owner)
	// No deadline at all: a call to the owner would wait an hour.
	allowed := 0
	for i := range 15 {
		res := check(context.Background())
		if res.Source != limiter.SourceFallback || res.Owner != owner || res.Err != nil {
			t.Fatalf("check %d of a suspect owner's key: %+v, want a fallback for %s", i, res, owner)
		}
		if res.Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 15 allowed by the local share, want 10", allowed)
	}
	lease, err := c.Node(checker).Acquire(context.Background(), limiter.AcquireRequest{Request: limiter.Request{Key: leaseKey, Limit: conc, Cost: 1, FailureMode: policy.FailLocal}})
	if err != nil || lease.Source != limiter.SourceFallback || !lease.Allowed {
		t.Fatalf("Acquire of a suspect owner's key: %+v, %v; want a local lease", lease, err)
	}
	if got := c.Net.Calls(checker, owner); got != before {
		t.Fatalf("calls to the suspect owner: %+v, then %+v; want none", before, got)
	}

	c.Node(checker).SetSuspects(nil)
	c.Net.Heal()
	if c.Node(checker).Suspects() != nil {
		t.Fatal("Suspects() not empty after SetSuspects(nil)")
	}
	if res := check(context.Background()); res.Source != limiter.SourceOwner || res.Remaining != 24 {
		t.Fatalf("after the suspicion: %+v, want the owner's count, 24 remaining", res)
	}
}
