package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func newLimiter(t *testing.T, set *policy.Set) *limiter.Limiter {
	t.Helper()
	l, err := limiter.New(limiter.Config{NodeName: "n1", Clock: func() time.Time { return t0 }, Policies: set})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func tb(limit int64, period time.Duration) bucket.Limit {
	return bucket.Limit{Algorithm: bucket.TokenBucket, Limit: limit, Period: period}
}

// One key carries layered limits: a per-second and a per-hour bucket are
// separate states, while the same period with a new number shares state.
func TestIdentityLayersLimits(t *testing.T) {
	l := newLimiter(t, nil)
	ctx := context.Background()
	check := func(lim bucket.Limit) limiter.Result {
		t.Helper()
		res, err := l.Check(ctx, []limiter.Request{{Key: "user:1", Limit: lim, Cost: 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := check(tb(2, time.Second)); r.Remaining != 1 {
		t.Fatalf("per-second: remaining %d, want 1", r.Remaining)
	}
	if r := check(tb(100, time.Hour)); r.Remaining != 99 {
		t.Fatalf("per-hour: remaining %d, want 99 (a separate bucket)", r.Remaining)
	}
	// Same period, new number: same state. GCRA keeps time owed, so the
	// unit spent at 2/s (500ms) weighs 2.5 units at 5/s: 5 - 2.5 - 1 = 1.
	if r := check(tb(5, time.Second)); r.Remaining != 1 {
		t.Fatalf("per-second raised to 5: remaining %d, want 1 (state kept)", r.Remaining)
	}
}

func TestValidationNamesFields(t *testing.T) {
	set, err := policy.NewSet(false, policy.Policy{Name: "api", Limit: tb(10, time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	strict := newLimiter(t, set)
	open := newLimiter(t, nil)
	cases := []struct {
		name  string
		l     *limiter.Limiter
		reqs  []limiter.Request
		index int
		field string
		is    error
	}{
		{"inline disabled", strict, []limiter.Request{{Key: "k", Limit: tb(1, time.Second), Cost: 1}}, 0, "limit", limiter.ErrInlineDisabled},
		{"unknown policy", strict, []limiter.Request{{Key: "k", Policy: "api", Cost: 1}, {Key: "k", Policy: "nope", Cost: 1}}, 1, "policy", limiter.ErrUnknownPolicy},
		{"cost over capacity", strict, []limiter.Request{{Key: "k", Policy: "api", Cost: 11}}, 0, "cost", limiter.ErrInvalid},
		{"burst on a window", open, []limiter.Request{{Key: "k", Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 5, Period: time.Second, Burst: 9}, Cost: 1}}, 0, "burst", limiter.ErrInvalid},
		{"concurrency via Check", open, []limiter.Request{{Key: "k", Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 5}, Cost: 1}}, 0, "algorithm", limiter.ErrInvalid},
		{"empty batch", open, nil, -1, "items", limiter.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.l.Check(context.Background(), tc.reqs, nil)
			var fe *limiter.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FieldError", err)
			}
			if fe.Index != tc.index || fe.Field != tc.field || !errors.Is(err, tc.is) {
				t.Fatalf("got index %d field %q (%v), want index %d field %q wrapping %v", fe.Index, fe.Field, err, tc.index, tc.field, tc.is)
			}
		})
	}
	// Nothing was consumed by the rejected batch that named "api" first.
	res, err := strict.Check(context.Background(), []limiter.Request{{Key: "k", Policy: "api", Cost: 0}}, nil)
	if err != nil || res[0].Remaining != 10 || res[0].Policy != "api" {
		t.Fatalf("usage after rejected batches: %+v %v, want 10 remaining under api", res, err)
	}
}

// A zero-cost Acquire reads the in-flight count and hands out no lease.
func TestAcquireZeroCostIsARead(t *testing.T) {
	l := newLimiter(t, nil)
	lim := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 3}
	lease, err := l.Acquire(context.Background(), limiter.AcquireRequest{Request: limiter.Request{Key: "t", Limit: lim, Cost: 0}})
	if err != nil {
		t.Fatal(err)
	}
	if lease.ID != "" || lease.Remaining != 3 {
		t.Fatalf("zero-cost acquire: %+v, want no lease and 3 remaining", lease)
	}
}
