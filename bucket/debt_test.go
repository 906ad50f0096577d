package bucket

import (
	"testing"
	"time"
)

// A token bucket of 10 per 10s (T = 1s, horizon 10s) under limit a, and a
// second limit b of 5 per 5s (horizon 5s) on the same key. a reserves its
// whole burst at t0 and settles 25: 10 go into debt (one burst below
// empty), 5 are forgiven. Each step runs at its instant on the state the
// steps before left.
func TestTokenDebtSteps(t *testing.T) {
	const s = int64(time.Second)
	a := Limit{Algorithm: TokenBucket, Limit: 10, Period: 10 * time.Second}
	b := Limit{Algorithm: TokenBucket, Limit: 5, Period: 5 * time.Second}
	type step struct {
		name   string
		at     int64
		l      Limit
		settle bool  // settle the reservation (estimate 10) at actual = n
		n      int64 // cost of a take, or the actual of a settle
		// want
		allowed           bool
		remaining         int64
		retry, reset      time.Duration
		charged, forgiven int64
		debt              int64 // a's debt in units after the step
	}
	steps := []step{
		{name: "reserve the burst", at: t0, l: a, n: 10, allowed: true, reset: 10 * time.Second},
		{name: "settle 25: 10 into debt, 5 forgiven", at: t0, l: a, settle: true, n: 25, allowed: true, charged: 15, forgiven: 0, reset: 20 * time.Second, debt: 10},
		{name: "owner denied for debt and unit", at: t0, l: a, n: 1, retry: 11 * time.Second, reset: 20 * time.Second, debt: 10},
		{name: "owner read: remaining 0", at: t0, l: a, n: 0, allowed: true, reset: 20 * time.Second, debt: 10},
		{name: "other limit: its own window only", at: t0, l: b, n: 1, retry: time.Second, reset: 5 * time.Second, debt: 10},
		{name: "owner halfway", at: t0 + 5*s, l: a, n: 1, retry: 6 * time.Second, reset: 15 * time.Second, debt: 5},
		// b's deny stored the TAT clamped to its horizon (t0+5s), as the
		// store does; a's debt is apart from it and stays.
		{name: "other limit after its window", at: t0 + 6*s, l: b, n: 1, allowed: true, remaining: 4, reset: time.Second, debt: 4},
		{name: "owner: debt paid, still empty", at: t0 + 10*s, l: a, n: 1, retry: time.Second, reset: 10 * time.Second},
		{name: "owner: refill after the debt", at: t0 + 11*s, l: a, n: 1, allowed: true, reset: 10 * time.Second},
		{name: "owner: the debt is folded", at: t0 + 11*s, l: a, n: 1, retry: time.Second, reset: 10 * time.Second},
	}
	// The settle of 25 on 10: 15 over, 10 fit below empty, 5 forgiven.
	steps[1].charged, steps[1].forgiven = 10, 5
	var st TokenState
	var d TokenDebt
	for _, tc := range steps {
		in, _ := ClampToken(st, tc.l, tc.at)
		var res Result
		if tc.settle {
			var sm Settlement
			st, d, sm = SettleTokenDebt(in, d, tc.l, tc.at, 10, tc.n)
			if sm.Charged != tc.charged || sm.Forgiven != tc.forgiven {
				t.Errorf("%s: charged %d forgiven %d, want %d %d", tc.name, sm.Charged, sm.Forgiven, tc.charged, tc.forgiven)
			}
			res = sm.Result
		} else {
			var err error
			if st, d, res, err = TakeTokenDebt(in, d, tc.l, tc.at, tc.n); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if res.Allowed != tc.allowed || res.Remaining != tc.remaining || res.RetryAfter != tc.retry || res.ResetAfter != tc.reset {
			t.Errorf("%s: %+v, want allowed %v remaining %d retry %v reset %v", tc.name, res, tc.allowed, tc.remaining, tc.retry, tc.reset)
		}
		if got := d.Units(tc.at); got != tc.debt {
			t.Errorf("%s: debt %d units, want %d", tc.name, got, tc.debt)
		}
		if ahead := st.TAT - tc.at; ahead > int64(a.Horizon()) {
			t.Errorf("%s: TAT %v ahead, beyond the horizon", tc.name, time.Duration(ahead))
		}
	}
}
