package bucket

import (
	"errors"
	"math"
	"testing"
	"time"
)

// hitsStep is one take of a fixed_window_hits step table: at t, count cost
// hits; count is the window's count the state must hold afterwards.
type hitsStep struct {
	t          int64
	cost       int64
	allowed    bool
	remaining  int64
	resetAfter time.Duration
	retryAfter time.Duration
	count      int64
}

func runHitsSteps(t *testing.T, l Limit, steps []hitsStep) {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Fatalf("limit %+v: %v", l, err)
	}
	var s WindowState
	for i, st := range steps {
		next, res, err := TakeFixedWindowHits(s, l, st.t, st.cost)
		if err != nil {
			t.Fatalf("step %d: t0+%v cost %d: %v", i, time.Duration(st.t-t0), st.cost, err)
		}
		want := Result{Allowed: st.allowed, Limit: l.Limit, Remaining: st.remaining,
			ResetAfter: st.resetAfter, RetryAfter: st.retryAfter, Count: st.count}
		if res != want {
			t.Errorf("step %d: t0+%v cost %d:\n got %+v\nwant %+v", i, time.Duration(st.t-t0), st.cost, res, want)
		}
		if next.Cur != st.count || next.Start%int64(l.Period) != 0 || next.Expires != next.Start+int64(l.Period) || next.Prev != 0 {
			t.Errorf("step %d: state %+v, want count %d in an aligned window", i, next, st.count)
		}
		s = next
	}
}

// TestTakeFixedWindowHitsSteps: the reference's counting. Every hit counts,
// denied ones too; over when the count after the hit exceeds the limit.
func TestTakeFixedWindowHitsSteps(t *testing.T) {
	const s = time.Second
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	var (
		t1 = at(10 * s)
		t2 = at(20 * s)
		t3 = at(30 * s)
		t4 = at(59*s + 999*time.Millisecond)
		t5 = at(60 * s) // the next window
		t6 = at(45 * s) // the clock steps back into the previous window
		t7 = at(5*time.Minute + 30*s)
	)
	l := Limit{Algorithm: FixedWindowHits, Limit: 3, Period: time.Minute}
	runHitsSteps(t, l, []hitsStep{
		{t: t1, cost: 1, allowed: true, remaining: 2, resetAfter: 50 * s, count: 1},
		{t: t2, cost: 2, allowed: true, remaining: 0, resetAfter: 40 * s, count: 3},
		// Over: counted all the same.
		{t: t3, cost: 1, remaining: 0, resetAfter: 30 * s, retryAfter: 30 * s, count: 4},
		// A read is over too once the count exceeds the limit.
		{t: t3, cost: 0, remaining: 0, resetAfter: 30 * s, retryAfter: 30 * s, count: 4},
		{t: t4, cost: 1, remaining: 0, resetAfter: time.Millisecond, retryAfter: time.Millisecond, count: 5},
		// A new window starts from zero.
		{t: t5, cost: 0, allowed: true, remaining: 3, count: 0},
		{t: t5, cost: 3, allowed: true, remaining: 0, resetAfter: 60 * s, count: 3},
		// A read at the limit (not over it) is allowed.
		{t: t5, cost: 0, allowed: true, remaining: 0, resetAfter: 60 * s, count: 3},
		// Clamped: the earlier window does not reopen.
		{t: t6, cost: 1, remaining: 0, resetAfter: 75 * s, retryAfter: 75 * s, count: 4},
		// A cost above the limit is counted and denied, not an error.
		{t: t7, cost: 10, remaining: 0, resetAfter: 30 * s, retryAfter: 30 * s, count: 10},
		{t: t7, cost: 1, remaining: 0, resetAfter: 30 * s, retryAfter: 30 * s, count: 11},
	})
}

func TestTakeFixedWindowHitsZeroLimit(t *testing.T) {
	const s = time.Second
	t1 := t0 + int64(s)
	l := Limit{Algorithm: FixedWindowHits, Limit: 0, Period: s}
	runHitsSteps(t, l, []hitsStep{
		{t: t1, cost: 0, allowed: true, remaining: 0, count: 0},
		{t: t1, cost: 1, remaining: 0, resetAfter: s, retryAfter: s, count: 1},
		{t: t1 + int64(s), cost: 1, remaining: 0, resetAfter: s, retryAfter: s, count: 1},
	})
}

func TestTakeFixedWindowHitsBounds(t *testing.T) {
	l := Limit{Algorithm: FixedWindowHits, Limit: MaxHitsLimit, Period: MaxPeriod}
	if err := l.Validate(); err != nil {
		t.Fatalf("a limit of MaxHitsLimit: %v", err)
	}
	// The count saturates instead of overflowing.
	s, res, err := TakeFixedWindowHits(WindowState{}, l, t0, math.MaxInt64)
	if err != nil || res.Allowed || s.Cur != math.MaxInt64 {
		t.Fatalf("MaxInt64 hits: %+v %+v %v", s, res, err)
	}
	s, res, _ = TakeFixedWindowHits(s, l, t0, math.MaxInt64)
	if res.Allowed || s.Cur != math.MaxInt64 || res.Remaining != 0 {
		t.Fatalf("saturated: %+v %+v", s, res)
	}
	if _, _, err := TakeFixedWindowHits(WindowState{}, l, t0, -1); !errors.Is(err, ErrNegativeCost) {
		t.Errorf("negative cost: err = %v", err)
	}
	for _, bad := range []Limit{
		{Algorithm: FixedWindowHits, Limit: -1, Period: time.Second},
		{Algorithm: FixedWindowHits, Limit: MaxHitsLimit + 1, Period: time.Second},
		{Algorithm: FixedWindowHits, Limit: 1},
		{Algorithm: FixedWindowHits, Limit: 1, Period: MaxPeriod + 1},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("%+v: Validate() = %v, want ErrInvalidLimit", bad, err)
		}
	}
	// Only this algorithm admits a limit of 0 or above MaxLimit.
	for _, bad := range []Limit{
		{Algorithm: FixedWindow, Limit: 0, Period: time.Second},
		{Algorithm: FixedWindow, Limit: MaxLimit + 1, Period: time.Second},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("%+v: Validate() = %v, want ErrInvalidLimit", bad, err)
		}
	}
}

// TestTakeFixedWindowHitsExpiredIsZero: an expired state behaves as the
// zero state, which lets the store drop it.
func TestTakeFixedWindowHitsExpiredIsZero(t *testing.T) {
	l := Limit{Algorithm: FixedWindowHits, Limit: 5, Period: time.Minute}
	s, _, _ := TakeFixedWindowHits(WindowState{}, l, t0+int64(59*time.Second), 9)
	exp := s.ExpiresAt()
	for _, now := range []int64{exp, exp + 1, exp + int64(time.Hour)} {
		for _, cost := range []int64{0, 1, 10} {
			gotS, got, _ := TakeFixedWindowHits(s, l, now, cost)
			wantS, want, _ := TakeFixedWindowHits(WindowState{}, l, now, cost)
			if got != want || gotS != wantS {
				t.Errorf("now=exp+%d cost %d: expired gives %+v %+v, zero gives %+v %+v", now-exp, cost, gotS, got, wantS, want)
			}
		}
	}
}
