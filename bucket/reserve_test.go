package bucket

import (
	"testing"
	"time"
)

// A token bucket of 100 per minute (T = 600ms, tau = 1m) that reserved an
// estimate of 100 at t0 (TAT = t0+1m, empty).
func TestSettleTokenSteps(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 100, Period: time.Minute}
	const ms = time.Millisecond
	reserved, res, err := TakeToken(TokenState{}, l, t0, 100)
	if err != nil || !res.Allowed {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	for _, tc := range []struct {
		name                        string
		at                          int64
		actual                      int64
		refunded, charged, forgiven int64
		remaining                   int64
		nextCost                    int64
		nextAllowed                 bool
		nextRetry                   time.Duration
	}{
		// Settle 40 of 100: 60 back, 60 left.
		{name: "refund", at: t0, actual: 40, refunded: 60, remaining: 60, nextCost: 60, nextAllowed: true},
		// Settled as estimated: nothing changes.
		{name: "exact", at: t0, actual: 100, remaining: 0, nextCost: 1, nextRetry: 600 * ms},
		// 300 of 100 on an empty bucket: 100 go into debt (one burst below
		// empty, TokenDebtBursts), 100 are forgiven; the next unit waits
		// for the debt and itself (60s + 600ms).
		{name: "excess on empty into debt", at: t0, actual: 300, charged: 100, forgiven: 100, remaining: 0, nextCost: 1, nextRetry: 60*time.Second + 600*ms},
		// 30s later 50 have refilled: 150 of 100 charges those 50.
		{name: "excess charged to empty", at: t0 + int64(30*time.Second), actual: 150, charged: 50, remaining: 0, nextCost: 1, nextRetry: 600 * ms},
		// 200 of 100 then: 50 to empty and 50 into debt (30s of refill).
		{name: "excess beyond empty", at: t0 + int64(30*time.Second), actual: 200, charged: 100, remaining: 0, nextCost: 1, nextRetry: 30*time.Second + 600*ms},
		// A refund is capped by what is missing: 30s later the bucket
		// has refilled 50, so of 100 only 50 come back (it is full).
		{name: "refund capped at full", at: t0 + int64(30*time.Second), actual: 0, refunded: 50, remaining: 100, nextCost: 100, nextAllowed: true},
		// Fully refilled before the settle: no refund at all.
		{name: "refund after refill", at: t0 + int64(2*time.Minute), actual: 0, refunded: 0, remaining: 100, nextCost: 100, nextAllowed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, debt, st := SettleTokenDebt(reserved, TokenDebt{}, l, tc.at, 100, tc.actual)
			if st.Refunded != tc.refunded || st.Charged != tc.charged || st.Forgiven != tc.forgiven {
				t.Fatalf("settlement %+v, want refunded %d charged %d forgiven %d", st, tc.refunded, tc.charged, tc.forgiven)
			}
			if st.Result.Remaining != tc.remaining {
				t.Errorf("remaining %d, want %d", st.Result.Remaining, tc.remaining)
			}
			if ahead := next.TAT - tc.at; ahead > int64(l.Horizon()) {
				t.Errorf("TAT %v ahead, beyond the horizon (the debt is kept apart)", time.Duration(ahead))
			}
			if ahead := debt.Until - tc.at; ahead > (1+TokenDebtBursts)*int64(l.Horizon()) {
				t.Errorf("debt until %v ahead, beyond the debt bound", time.Duration(ahead))
			}
			// The store clamps every state it reads: a settled state is never clamped.
			clamped, c := ClampToken(next, l, tc.at)
			if c {
				t.Errorf("settled TAT %v clamped", next)
			}
			_, _, r, err := TakeTokenDebt(clamped, debt, l, tc.at, tc.nextCost)
			if err != nil || r.Allowed != tc.nextAllowed || r.RetryAfter != tc.nextRetry {
				t.Errorf("next take of %d: %+v %v, want allowed %v retry %v", tc.nextCost, r, err, tc.nextAllowed, tc.nextRetry)
			}
		})
	}
}

// A fixed window of 100 per minute that reserved 100 in the window at t0.
func TestSettleWindowSteps(t *testing.T) {
	const m = time.Minute
	w0 := t0 - t0%int64(m)
	for _, alg := range []Algorithm{FixedWindow, FixedWindowHits, SlidingWindow} {
		l := Limit{Algorithm: alg, Limit: 100, Period: m}
		take := TakeFixedWindow
		if alg == SlidingWindow {
			take = TakeSlidingWindow
		} else if alg == FixedWindowHits {
			take = TakeFixedWindowHits
		}
		reserved, _, err := take(WindowState{}, l, w0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name                        string
			at                          int64
			actual                      int64
			refunded, charged, forgiven int64
			cur                         int64
		}{
			{name: "refund in window", at: w0 + 1, actual: 40, refunded: 60, cur: 40},
			{name: "excess in window", at: w0 + 1, actual: 150, charged: 50, cur: 150},
			{name: "excess beyond bound", at: w0 + 1, actual: 400, charged: 100, forgiven: 200, cur: 200},
			// The window has ended: the refund is dropped, the excess
			// goes to the current window.
			{name: "refund after window", at: w0 + 2*int64(m) + 1, actual: 0, cur: 0},
			{name: "excess after window", at: w0 + 2*int64(m) + 1, actual: 130, charged: 30, cur: 30},
		} {
			t.Run(alg.String()+"/"+tc.name, func(t *testing.T) {
				next, st := SettleWindow(reserved, l, tc.at, w0, 100, tc.actual)
				if st.Refunded != tc.refunded || st.Charged != tc.charged || st.Forgiven != tc.forgiven || next.Cur != tc.cur {
					t.Fatalf("settlement %+v, state %+v; want refunded %d charged %d forgiven %d cur %d",
						st, next, tc.refunded, tc.charged, tc.forgiven, tc.cur)
				}
				if next.Cur > 100 {
					// Over the limit: a check is denied until the window ends.
					_, r, _ := take(next, l, tc.at, 1)
					if r.Allowed || r.RetryAfter <= 0 {
						t.Errorf("check in debt: %+v", r)
					}
				}
			})
		}
	}
	// A sliding window's previous window still weighs: a refund there
	// lowers Prev.
	l := Limit{Algorithm: SlidingWindow, Limit: 100, Period: m}
	reserved, _, _ := TakeSlidingWindow(WindowState{}, l, w0, 100)
	next, st := SettleWindow(reserved, l, w0+int64(m)+1, w0, 100, 40)
	if st.Refunded != 60 || next.Prev != 40 || next.Cur != 0 {
		t.Errorf("sliding refund in the previous window: %+v %+v", st, next)
	}
}

// Settling is idempotent and an unsettled reservation settles at its
// estimate when its TTL ends: the records' side.
func TestReservationRecords(t *testing.T) {
	rs := []Reservation{
		{ID: 1, Tag: 11, Estimate: 100, Expires: t0 + 10},
		{ID: 2, Tag: 22, Holder: 7, Estimate: 5, Expires: t0 + 20},
	}
	if i := FindReservation(rs, t0, 1, 11, 0); i != 0 {
		t.Fatalf("find 1: %d", i)
	}
	for _, bad := range [][3]uint64{{1, 12, 0}, {2, 22, 0}, {3, 33, 0}} {
		if i := FindReservation(rs, t0, bad[0], bad[1], bad[2]); i != -1 {
			t.Errorf("find %v: %d, want -1 (wrong tag, holder or id)", bad, i)
		}
	}
	// At its TTL the first is gone (it settled at its estimate: the
	// state keeps the estimate taken, nothing to apply).
	rs = LiveReservations(rs, t0+10)
	if len(rs) != 1 || rs[0].ID != 2 {
		t.Fatalf("live at TTL: %+v", rs)
	}
	if i := FindReservation(rs, t0+10, 1, 11, 0); i != -1 {
		t.Errorf("expired reservation found")
	}
}

// A second settle of one reservation applies nothing and repeats the
// first's outcome.
func TestSettleRecordIdempotent(t *testing.T) {
	l := Limit{Algorithm: TokenBucket, Limit: 100, Period: time.Minute}
	s, _, _ := TakeToken(TokenState{}, l, t0, 100)
	r := Reservation{ID: 1, Tag: 2, Estimate: 100, Expires: t0 + int64(time.Minute)}
	apply := func(est, actual int64) Settlement {
		var st Settlement
		s, st = SettleToken(s, l, t0, est, actual)
		return st
	}
	first, already := SettleRecord(&r, 40, apply)
	if already || first.Refunded != 60 || !r.Settled || r.Actual != 40 {
		t.Fatalf("first settle: %+v already %v, record %+v", first, already, r)
	}
	after := s
	for _, actual := range []int64{40, 300} {
		again, already := SettleRecord(&r, actual, apply)
		if !already || again.Refunded != 60 || again.Charged != 0 || s != after || r.Actual != 40 {
			t.Errorf("settle again with %d: %+v already %v, state %+v (was %+v)", actual, again, already, s, after)
		}
	}
}
