package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// TestCalendarQuotaAtBoundary: a token bucket with calendar: day in
// Europe/Berlin is a quota, checked from a node that does not own the key:
// reset_after and retry_after run to Berlin's midnight (limitertest's
// epoch, 2026-12-02 12:00 UTC, is 13:00 there: 11 hours), the quota is full
// again at the boundary, and a duration limit on the same key keeps its own
// state.
func TestCalendarQuotaAtBoundary(t *testing.T) {
	c := limitertest.NewCluster(t, nil, names(2)...)
	quota := limiter.Request{Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 3, Calendar: bucket.Day}, Timezone: "Europe/Berlin"}
	quota.Key = c.KeysOwnedBy("n0", "n1", "tenant", quota, 1)[0]
	daily := limiter.Request{Key: quota.Key, Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 3, Period: 24 * time.Hour}}
	check := func(r limiter.Request, cost int64) bucket.Result {
		t.Helper()
		r.Cost = cost
		res := c.Check("n0", r)[0]
		if res.Err != nil {
			t.Fatalf("check: %v", res.Err)
		}
		if res.Source != limiter.SourceOwner {
			t.Fatalf("answered by %s, want the owner", res.Source)
		}
		return res.Result
	}
	const h = time.Hour
	for i, st := range []struct {
		advance      time.Duration
		cost         int64
		allowed      bool
		remaining    int64
		reset, retry time.Duration
	}{
		{0, 3, true, 0, 11 * h, 0},
		{0, 1, false, 0, 11 * h, 11 * h},
		{11*h - 1, 1, false, 0, 1, 1},
		{1, 1, true, 2, 24 * h, 0}, // 2026-12-03 00:00 in Berlin
	} {
		c.Clock.Advance(st.advance)
		got := check(quota, st.cost)
		want := bucket.Result{Allowed: st.allowed, Limit: 3, Remaining: st.remaining, ResetAfter: st.reset, RetryAfter: st.retry}
		if got != want {
			t.Errorf("step %d: %+v, want %+v", i, got, want)
		}
	}
	// A duration limit, and another calendar, of the same key were not
	// touched by the quota: each is its own bucket.
	monthly := quota
	monthly.Limit.Calendar = bucket.Month
	for _, other := range []limiter.Request{daily, monthly} {
		if got := check(other, 0); got.Remaining != 3 {
			t.Errorf("%+v on the same key: %+v, want 3 remaining (its own state)", other.Limit, got)
		}
	}
}

// TestCalendarBadInput: the limiter names the field of a bad calendar
// limit.
func TestCalendarBadInput(t *testing.T) {
	c := limitertest.NewCluster(t, nil, names(1)...)
	for _, tc := range []struct {
		req   limiter.Request
		field string
	}{
		{limiter.Request{Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 3, Calendar: bucket.Day}, Timezone: "Mars/Olympus"}, "timezone"},
		{limiter.Request{Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 3, Calendar: bucket.Day}, Timezone: "Local"}, "timezone"},
		{limiter.Request{Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 3, Period: time.Hour}, Timezone: "Europe/Berlin"}, "timezone"},
		{limiter.Request{Limit: bucket.Limit{Algorithm: bucket.SlidingWindow, Limit: 3, Calendar: bucket.Day}}, "calendar"},
		{limiter.Request{Limit: bucket.Limit{Algorithm: bucket.SlidingLog, Limit: 3, Calendar: bucket.Week}}, "calendar"},
		{limiter.Request{Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 3, Calendar: 7}}, "calendar"},
		{limiter.Request{Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 3, Calendar: bucket.Month, Period: time.Hour}}, "period"},
		{limiter.Request{Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 3, Calendar: bucket.Month, Burst: 5}}, "burst"},
	} {
		tc.req.Key, tc.req.Cost = "k", 1
		_, err := c.Node("n0").Check(context.Background(), []limiter.Request{tc.req}, nil)
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("%+v: err = %v, want a FieldError naming %s", tc.req, err, tc.field)
		}
	}
	// A grant of a quota is refused: it has no refill rate to grant ahead of.
	up := limiter.Request{Key: "k", Cost: 2, UpTo: true, Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 3, Calendar: bucket.Day}}
	_, err := c.Node("n0").Check(context.Background(), []limiter.Request{up}, nil)
	var fe *limiter.FieldError
	if !errors.As(err, &fe) {
		t.Errorf("a grant of a quota: err = %v, want a FieldError", err)
	}
}
