package bucket

import (
	"errors"
	"testing"
	"time"
)

func TestTakeTokenSteps(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Hour} // T = 6m, tau = 1h
	const m = time.Minute
	t1 := t0 + int64(6*m)
	back := t0 + int64(3*m)
	t2 := t0 + int64(30*m)
	t3 := t0 + int64(150*m)
	runSteps(t, TakeToken, l, TokenState{}, []step{
		// Burst, then settle.
		{t: t0, cost: 1, allowed: true, remaining: 9, resetAfter: 6 * m},
		{t: t0, cost: 3, allowed: true, remaining: 6, resetAfter: 24 * m},
		{t: t0, cost: 6, allowed: true, remaining: 0, resetAfter: 60 * m},
		{t: t0, cost: 1, remaining: 0, resetAfter: 60 * m, retryAfter: 6 * m},
		{t: t0, cost: 0, allowed: true, remaining: 0, resetAfter: 60 * m}, // read
		// Refill: one unit at exactly t0+6m, not a nanosecond before.
		{t: t1 - 1, cost: 1, remaining: 0, resetAfter: 54*m + 1, retryAfter: 1},
		{t: t1, cost: 1, allowed: true, remaining: 0, resetAfter: 60 * m},
		{t: t1, cost: 11, err: ErrCostExceedsCapacity},
		{t: t1, cost: -1, err: ErrNegativeCost},
		// Clock steps back 3m: clamped to TAT-tau, so the bucket looks
		// empty, never more; durations are from the caller's now.
		{t: back, cost: 0, allowed: true, remaining: 0, resetAfter: 63 * m},
		{t: back, cost: 1, remaining: 0, resetAfter: 63 * m, retryAfter: 9 * m},
		// Partially refilled; a deny consumes nothing.
		{t: t2, cost: 0, allowed: true, remaining: 4, resetAfter: 36 * m},
		{t: t2, cost: 5, remaining: 4, resetAfter: 36 * m, retryAfter: 6 * m},
		{t: t2, cost: 4, allowed: true, remaining: 0, resetAfter: 60 * m},
		{t: t2 + int64(3*m), cost: 0, allowed: true, remaining: 0, resetAfter: 57 * m},
		{t: t2 + int64(6*m), cost: 0, allowed: true, remaining: 1, resetAfter: 54 * m},
		// Long idle: full again.
		{t: t3, cost: 0, allowed: true, remaining: 10},
		{t: t3, cost: 10, allowed: true, remaining: 0, resetAfter: 60 * m},
	}, nil)
}

func TestTakeToken100PerMinute(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 100, Period: time.Minute} // T = 600ms
	const ms = time.Millisecond
	runSteps(t, TakeToken, l, TokenState{}, []step{
		{t: t0, cost: 1, allowed: true, remaining: 99, resetAfter: 600 * ms},
		{t: t0, cost: 99, allowed: true, remaining: 0, resetAfter: time.Minute},
		{t: t0 + int64(300*ms), cost: 1, remaining: 0, resetAfter: 59700 * ms, retryAfter: 300 * ms},
		{t: t0 + int64(600*ms), cost: 1, allowed: true, remaining: 0, resetAfter: time.Minute},
		{t: t0 + int64(30600*ms), cost: 0, allowed: true, remaining: 50, resetAfter: 30 * time.Second},
	}, nil)
}

func TestTakeTokenBurst(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 1, Period: time.Second, Burst: 5} // T = 1s, tau = 5s
	const s = time.Second
	runSteps(t, TakeToken, l, TokenState{}, []step{
		{t: t0, cost: 5, allowed: true, remaining: 0, resetAfter: 5 * s},
		{t: t0 + int64(s), cost: 2, remaining: 1, resetAfter: 4 * s, retryAfter: s},
		{t: t0 + int64(2*s), cost: 2, allowed: true, remaining: 0, resetAfter: 5 * s},
		{t: t0 + int64(2*s), cost: 6, err: ErrCostExceedsCapacity},
	}, nil)
}

// TestTakeTokenTenPerHour: exactly 10 takes of cost 1 succeed at the same
// instant and the 11th is denied with RetryAfter = 6 minutes.
func TestTakeTokenTenPerHour(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Hour}
	var s TokenState
	for i := range 10 {
		next, res, err := TakeToken(s, l, t0, 1)
		if err != nil || !res.Allowed || res.Remaining != int64(9-i) {
			t.Fatalf("take %d: %+v, %v", i, res, err)
		}
		s = next
	}
	next, res, err := TakeToken(s, l, t0, 1)
	if err != nil || res.Allowed || res.RetryAfter != 6*time.Minute || next != s {
		t.Fatalf("11th take: %+v, %v, state %+v -> %+v", res, err, s, next)
	}
}

func TestTakeTokenExpiredIsZero(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second}
	s, _, _ := TakeToken(TokenState{}, l, t0, 4)
	if s.ExpiresAt() != t0+int64(400*time.Millisecond) {
		t.Fatalf("ExpiresAt = t0+%v, want t0+400ms", time.Duration(s.ExpiresAt()-t0))
	}
	for _, now := range []int64{s.ExpiresAt(), s.ExpiresAt() + 1, s.ExpiresAt() + int64(time.Hour)} {
		for _, cost := range []int64{0, 1, 10} {
			gotS, got, _ := TakeToken(s, l, now, cost)
			wantS, want, _ := TakeToken(TokenState{}, l, now, cost)
			if got != want || (gotS != wantS && (cost != 0 || gotS != s || wantS != TokenState{})) {
				t.Errorf("now=exp+%v cost %d: expired gives %+v %+v, zero gives %+v %+v",
					time.Duration(now-s.ExpiresAt()), cost, gotS, got, wantS, want)
			}
		}
	}
	// A read returns the state unchanged, even an expired one.
	if next, _, _ := TakeToken(s, l, s.ExpiresAt(), 0); next != s {
		t.Errorf("read of expired state = %+v, want %+v", next, s)
	}
}

func TestTakeTokenErrorsLeaveStateUnchanged(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second}
	s := TokenState{TAT: t0 + 5}
	for _, cost := range []int64{-1, 11} {
		next, res, err := TakeToken(s, l, t0, cost)
		if err == nil || next != s || res.Allowed {
			t.Errorf("cost %d: %+v %+v %v", cost, next, res, err)
		}
	}
}

func TestGiveTokenSteps(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Hour} // T = 6m, tau = 1h
	const m = time.Minute
	type give struct {
		t         int64
		take      int64 // taken first, at t
		give      int64
		given     int64
		remaining int64
		err       error
	}
	s := TokenState{}
	for i, st := range []give{
		{t: t0, take: 6, give: 4, given: 4, remaining: 8},                 // 6 spent, 4 back: 8 left
		{t: t0, give: 5, given: 2, remaining: 10},                         // never above capacity
		{t: t0, give: 1, given: 0, remaining: 10},                         // a full bucket takes nothing
		{t: t0, take: 10, give: 0, given: 0, remaining: 0},                // nothing given back
		{t: t0 + int64(3*m), give: 1, given: 1, remaining: 1},             // half a unit refilled counts as missing
		{t: t0 + int64(3*m), give: 11, err: ErrCostExceedsCapacity},       // bad input: state unchanged
		{t: t0 + int64(3*m), give: -1, err: ErrNegativeCost},              //
		{t: t0 - int64(30*m), give: 2, given: 2, remaining: 0},            // clock stepped back: the bucket reads empty until the clock catches up
		{t: t0 + int64(150*m), take: 3, give: 3, given: 3, remaining: 10}, // long idle, then a full return
	} {
		if st.take > 0 {
			var res Result
			var err error
			if s, res, err = TakeToken(s, l, st.t, st.take); err != nil || !res.Allowed {
				t.Fatalf("step %d: take %d: %+v, %v", i, st.take, res, err)
			}
		}
		before := s
		ns, given, res, err := GiveToken(s, l, st.t, st.give)
		if st.err != nil {
			if !errors.Is(err, st.err) || ns != before || given != 0 {
				t.Fatalf("step %d: GiveToken(%d) = %+v, %d, %v; want %v and the state unchanged", i, st.give, ns, given, err, st.err)
			}
			continue
		}
		if err != nil || given != st.given || res.Remaining != st.remaining || !res.Allowed {
			t.Fatalf("step %d: GiveToken(%d) gave %d, remaining %d (%v); want %d, %d", i, st.give, given, res.Remaining, err, st.given, st.remaining)
		}
		s = ns
	}
}
