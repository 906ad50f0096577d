package bucket

import (
	"testing"
	"time"
)

func TestTakeFixedWindowSteps(t *testing.T) {
	l := Limit{Algorithm: FixedWindow, Limit: 5, Period: time.Minute}
	const s = time.Second
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	runSteps(t, TakeFixedWindow, l, WindowState{}, []step{
		{t: at(10 * s), cost: 2, allowed: true, remaining: 3, resetAfter: 50 * s},
		{t: at(20 * s), cost: 3, allowed: true, remaining: 0, resetAfter: 40 * s},
		{t: at(30 * s), cost: 1, remaining: 0, resetAfter: 30 * s, retryAfter: 30 * s},
		{t: at(30 * s), cost: 0, allowed: true, remaining: 0, resetAfter: 30 * s},
		{t: at(30 * s), cost: 6, err: ErrCostExceedsCapacity},
		{t: at(30 * s), cost: -1, err: ErrNegativeCost},
		// Rollover by one window.
		{t: at(60 * s), cost: 1, allowed: true, remaining: 4, resetAfter: 60 * s},
		// The clock steps back into the previous window: clamped to the
		// current window's start, so the old window does not reopen.
		{t: at(50 * s), cost: 0, allowed: true, remaining: 4, resetAfter: 70 * s},
		{t: at(50 * s), cost: 4, allowed: true, remaining: 0, resetAfter: 70 * s},
		{t: at(55 * s), cost: 1, remaining: 0, resetAfter: 65 * s, retryAfter: 65 * s},
		// Rollover by several windows.
		{t: at(5*time.Minute + s), cost: 0, allowed: true, remaining: 5},
		{t: at(5*time.Minute + s), cost: 5, allowed: true, remaining: 0, resetAfter: 59 * s},
		{t: at(6*time.Minute - 1), cost: 1, remaining: 0, resetAfter: 1, retryAfter: 1},
		{t: at(6 * time.Minute), cost: 1, allowed: true, remaining: 4, resetAfter: 60 * s},
	}, func(i int, s WindowState) {
		if s.Start%int64(l.Period) != 0 || s.Expires != s.Start+int64(l.Period) || s.Prev != 0 {
			t.Errorf("step %d: malformed state %+v", i, s)
		}
	})
}

func TestTakeSlidingWindowSteps(t *testing.T) {
	l := Limit{Algorithm: SlidingWindow, Limit: 10, Period: 10 * time.Second}
	const s = time.Second
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	runSteps(t, TakeSlidingWindow, l, WindowState{}, []step{
		{t: at(0), cost: 4, allowed: true, remaining: 6, resetAfter: 20 * s},
		{t: at(5 * s), cost: 6, allowed: true, remaining: 0, resetAfter: 15 * s},
		// Full: the 10 units weigh 9 at t0+11s, leaving room for one.
		{t: at(9 * s), cost: 1, remaining: 0, resetAfter: 11 * s, retryAfter: 2 * s},
		// Rollover by one window: Prev = 10 weighs ceil(9.0000000001) = 10.
		{t: at(11*s - 1), cost: 1, remaining: 0, resetAfter: 9*s + 1, retryAfter: 1},
		{t: at(11 * s), cost: 1, allowed: true, remaining: 0, resetAfter: 19 * s},
		{t: at(15 * s), cost: 0, allowed: true, remaining: 4, resetAfter: 15 * s},
		// A deny consumes nothing; the retry is within the window.
		{t: at(15 * s), cost: 5, remaining: 4, resetAfter: 15 * s, retryAfter: s},
		{t: at(16 * s), cost: 5, allowed: true, remaining: 0, resetAfter: 14 * s},
		// The clock steps back into the previous window: clamped to this
		// window's start, where Prev weighs fully.
		{t: at(8 * s), cost: 0, allowed: true, remaining: 0, resetAfter: 22 * s},
		{t: at(8 * s), cost: 1, remaining: 0, resetAfter: 22 * s, retryAfter: 9 * s},
		{t: at(10 * s), cost: 11, err: ErrCostExceedsCapacity},
		{t: at(10 * s), cost: -1, err: ErrNegativeCost},
		// Rollover by one: Prev = 6 weighs 3 half-way through.
		{t: at(25 * s), cost: 0, allowed: true, remaining: 7, resetAfter: 5 * s},
		{t: at(25 * s), cost: 7, allowed: true, remaining: 0, resetAfter: 15 * s},
		// Prev = 7 weighs ceil(3.5) = 4: rounding up is conservative.
		{t: at(35 * s), cost: 1, allowed: true, remaining: 5, resetAfter: 15 * s},
		// Rollover by several windows: expired, empty.
		{t: at(60 * s), cost: 0, allowed: true, remaining: 10},
		// A take of the whole limit must wait until the count has slid out
		// completely, two windows on.
		{t: at(60 * s), cost: 10, allowed: true, remaining: 0, resetAfter: 20 * s},
		{t: at(65 * s), cost: 10, remaining: 0, resetAfter: 15 * s, retryAfter: 15 * s},
		{t: at(80*s - 1), cost: 10, remaining: 9, resetAfter: 1, retryAfter: 1},
		{t: at(80 * s), cost: 10, allowed: true, remaining: 0, resetAfter: 20 * s},
	}, func(i int, s WindowState) {
		if s.Start%int64(l.Period) != 0 || s.Expires != s.Start+2*int64(l.Period) {
			t.Errorf("step %d: malformed state %+v", i, s)
		}
	})
}

func TestWindowRollover(t *testing.T) {
	p := int64(time.Minute)
	s := WindowState{Start: t0, Expires: t0 + 2*p, Prev: 3, Cur: 4}
	l := Limit{Algorithm: SlidingWindow, Limit: 10, Period: time.Minute}
	tests := []struct {
		now  int64
		want WindowState
	}{
		{t0, WindowState{Start: t0, Expires: t0 + 2*p, Prev: 3, Cur: 4}},
		{t0 - 5, WindowState{Start: t0, Expires: t0 + 2*p, Prev: 3, Cur: 4}}, // clamped
		{t0 + p - 1, WindowState{Start: t0, Expires: t0 + 2*p, Prev: 3, Cur: 4}},
		{t0 + p, WindowState{Start: t0 + p, Expires: t0 + 3*p, Prev: 4}},
		{t0 + 2*p - 1, WindowState{Start: t0 + p, Expires: t0 + 3*p, Prev: 4}},
		{t0 + 2*p, WindowState{Start: t0 + 2*p, Expires: t0 + 4*p}},
		{t0 + 7*p + 3, WindowState{Start: t0 + 7*p, Expires: t0 + 9*p}},
	}
	for i, tt := range tests {
		got, res, err := TakeSlidingWindow(s, l, tt.now, 0)
		if err != nil || !res.Allowed || got != tt.want {
			t.Errorf("%d: now t0%+d: got %+v %+v %v, want %+v", i, tt.now-t0, got, res, err, tt.want)
		}
	}
	// The fixed window rolls the same way but keeps no Prev.
	lf := Limit{Algorithm: FixedWindow, Limit: 10, Period: time.Minute}
	sf := WindowState{Start: t0, Expires: t0 + p, Cur: 4}
	if got, _, _ := TakeFixedWindow(sf, lf, t0+p, 0); got != (WindowState{Start: t0 + p, Expires: t0 + 2*p}) {
		t.Errorf("fixed rollover: got %+v", got)
	}
}

func TestWindowExpiredIsZero(t *testing.T) {
	for _, tc := range []struct {
		name string
		take takeFunc[WindowState]
		l    Limit
	}{
		{"fixed", TakeFixedWindow, Limit{Algorithm: FixedWindow, Limit: 10, Period: time.Minute}},
		{"sliding", TakeSlidingWindow, Limit{Algorithm: SlidingWindow, Limit: 10, Period: time.Minute}},
	} {
		s, _, _ := tc.take(WindowState{}, tc.l, t0+int64(59*time.Second), 7)
		s, _, _ = tc.take(s, tc.l, t0+int64(61*time.Second), 2)
		exp := s.ExpiresAt()
		for _, now := range []int64{exp, exp + 1, exp + int64(time.Minute) - 1, exp + int64(time.Hour)} {
			for _, cost := range []int64{0, 1, 10} {
				gotS, got, _ := tc.take(s, tc.l, now, cost)
				wantS, want, _ := tc.take(WindowState{}, tc.l, now, cost)
				if got != want || gotS != wantS {
					t.Errorf("%s: now=exp+%d cost %d: expired gives %+v %+v, zero gives %+v %+v",
						tc.name, now-exp, cost, gotS, got, wantS, want)
				}
			}
		}
	}
}

// TestSlidingWindowHugeValues exercises the 128-bit arithmetic: the product
// Prev × Period overflows int64.
func TestSlidingWindowHugeValues(t *testing.T) {
	l := Limit{Algorithm: SlidingWindow, Limit: MaxLimit, Period: MaxPeriod}
	p := int64(MaxPeriod)
	start := (t0 / p) * p
	s := WindowState{Start: start, Expires: start + 2*p, Prev: MaxLimit}
	// Half-way through, Prev weighs exactly half.
	_, res, err := TakeSlidingWindow(s, l, start+p/2, 0)
	if err != nil || res.Remaining != MaxLimit/2 {
		t.Fatalf("half-way: %+v %v", res, err)
	}
	// One nanosecond in, Prev weighs ceil(MaxLimit×(p-1)/p) = MaxLimit.
	_, res, _ = TakeSlidingWindow(s, l, start+1, 1)
	if res.Allowed || res.Remaining != 0 {
		t.Fatalf("1ns in: %+v", res)
	}
	// The retry instant is exact.
	r := int64(res.RetryAfter)
	if _, res2, _ := TakeSlidingWindow(s, l, start+1+r, 1); !res2.Allowed {
		t.Errorf("at now+RetryAfter: %+v", res2)
	}
	if _, res2, _ := TakeSlidingWindow(s, l, start+r, 1); res2.Allowed {
		t.Errorf("at now+RetryAfter-1: %+v", res2)
	}
}
