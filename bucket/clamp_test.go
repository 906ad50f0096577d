package bucket

import (
	"testing"
	"time"
)

// The attack: under one key and period, a caller with limit 1 burst
// 61 takes 61; a caller with 3/min must not be locked out for longer than
// its own window (one emission interval for a unit, its horizon to full).
func TestClampTokenSteps(t *testing.T) {
	const m, s = time.Minute, time.Second
	attacker := Limit{Algorithm: TokenBucket, Limit: 1, Period: m, Burst: 61} // T = 1m, tau = 61m
	victim := Limit{Algorithm: TokenBucket, Limit: 3, Period: m}              // T = 20s, tau = 1m
	st, res, err := TakeToken(TokenState{}, attacker, t0, 61)
	if err != nil || !res.Allowed {
		t.Fatalf("attacker's take: %+v, %v", res, err)
	}
	for i, tc := range []struct {
		state      TokenState
		at         int64
		l          Limit
		clamped    bool
		cost       int64
		allowed    bool
		retryAfter time.Duration
		resetAfter time.Duration
	}{
		// The attacker's state, read by the victim: an empty bucket of its own.
		{state: st, at: t0, l: victim, clamped: true, cost: 1, retryAfter: 20 * s, resetAfter: m},
		{state: st, at: t0 + int64(20*s), l: victim, clamped: true, cost: 1, retryAfter: 20 * s, resetAfter: m},
		// Read by the attacker's own limit: unchanged.
		{state: st, at: t0, l: attacker, cost: 1, retryAfter: m, resetAfter: 61 * m},
		// Within the victim's horizon: unchanged, exact.
		{state: TokenState{TAT: t0 + int64(m)}, at: t0, l: victim, cost: 1, retryAfter: 20 * s, resetAfter: m},
		{state: TokenState{TAT: t0 + int64(40*s)}, at: t0, l: victim, cost: 1, allowed: true, resetAfter: m},
		// One nanosecond beyond: clamped to the horizon.
		{state: TokenState{TAT: t0 + int64(m) + 1}, at: t0, l: victim, clamped: true, cost: 1, retryAfter: 20 * s, resetAfter: m},
		// Expired and zero states are untouched.
		{state: TokenState{}, at: t0, l: victim, cost: 1, allowed: true, resetAfter: 20 * s},
		{state: TokenState{TAT: t0 - int64(m)}, at: t0, l: victim, cost: 1, allowed: true, resetAfter: 20 * s},
		// Clock stepped back 3m after the victim emptied its bucket at
		// t0: read as empty at the new now, never fuller.
		{state: TokenState{TAT: t0 + int64(m)}, at: t0 - int64(3*m), l: victim, clamped: true, cost: 1, retryAfter: 20 * s, resetAfter: m},
	} {
		next, clamped := ClampToken(tc.state, tc.l, tc.at)
		if clamped != tc.clamped {
			t.Errorf("row %d: clamped = %v, want %v", i, clamped, tc.clamped)
		}
		if !clamped && next != tc.state {
			t.Errorf("row %d: state changed without a clamp: %+v -> %+v", i, tc.state, next)
		}
		_, res, err := TakeToken(next, tc.l, tc.at, tc.cost)
		if err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		if res.Allowed != tc.allowed || res.RetryAfter != tc.retryAfter || res.ResetAfter != tc.resetAfter {
			t.Errorf("row %d: %+v, want allowed %v retry %v reset %v", i, res, tc.allowed, tc.retryAfter, tc.resetAfter)
		}
	}
}
