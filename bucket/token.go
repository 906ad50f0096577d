package bucket

import "time"

// TokenState is a token bucket kept as GCRA's theoretical arrival time (TAT):
// the unix-nanosecond instant at which the bucket would be full again. The
// zero state is a full bucket, and so is any state whose TAT is not after now.
type TokenState struct {
	TAT int64
}

// ExpiresAt is the instant from which the state equals the zero state.
func (s TokenState) ExpiresAt() int64 { return s.TAT }

// TakeToken spends cost units from a token bucket of capacity l.Capacity()
// refilled at l.Limit per l.Period, using the generic cell rate algorithm.
//
// One unit is emitted every interval T = ceil(Period/Limit) (rounding up, so
// rounding can only under-admit) and the bucket holds capacity B units, so
// the state may run at most tau = B×T ahead of now. A take of cost n computes
// TAT' = max(TAT, now) + n×T and is allowed iff TAT'-now <= tau. Over any
// interval of length X the admitted cost is at most B + X×Limit/Period.
//
// Clamp: GCRA keeps no "last seen" time, so a backwards clock step is clamped
// by treating now as at least TAT - tau, the last instant at which the bucket
// could have been empty: the bucket never appears more than empty, Remaining
// is never negative and a read (cost 0) is always allowed. This does not change
// any decision for cost > 0 (such a take is denied either way), so the bound
// above holds for events in any time order. ResetAfter (TAT'-now) and
// RetryAfter are measured from the caller's now and are exact on its clock.
//
// A read or a denied take returns the state unchanged: even when it has
// expired (TAT <= now, a full bucket, equivalent to the zero state) it keeps
// the TAT, which anchors the clamp.
func TakeToken(s TokenState, l Limit, now, cost int64) (TokenState, Result, error) {
	// The fields are read once, by hand: Limit is too large for the
	// compiler to keep in registers, and a method call on it (Capacity,
	// interval) copies it.
	limit, capacity, period := l.Limit, l.Limit, int64(l.Period)
	if l.Algorithm == TokenBucket && l.Burst > 0 { // Limit.Capacity
		capacity = l.Burst
	}
	if cost < 0 || cost > capacity {
		return s, Result{Limit: capacity}, costError(cost, capacity)
	}
	interval := (period + limit - 1) / limit // Limit.interval
	tau := capacity * interval
	eff := now
	if floor := s.TAT - tau; eff < floor {
		eff = floor
	}
	// ahead is how far TAT runs ahead of the effective now (0..tau; 0 for a
	// full bucket, including an expired state), need how far TAT' would.
	ahead := max(s.TAT-eff, 0)
	need := ahead + cost*interval
	res := Result{Limit: capacity}
	if need <= tau {
		res.Allowed = true
		res.Remaining = (tau - need) / interval
		if cost > 0 {
			s.TAT = eff + need // eff == now here: a clamped take of cost > 0 is denied
		}
		if s.TAT > now {
			res.ResetAfter = time.Duration(s.TAT - now)
		}
		return s, res, nil
	}
	// Denied: the bucket is short of need-tau nanoseconds of refill, measured
	// from eff. Since need > tau >= cost×T, TAT > eff here.
	res.Remaining = (tau - ahead) / interval
	res.ResetAfter = time.Duration(s.TAT - now)
	res.RetryAfter = time.Duration(eff - now + need - tau)
	return s, res, nil
}

// GiveToken adds n units back to a token bucket (the unspent tokens of a
// grant that ended early), never above capacity: TAT moves back n
// intervals, but not before now, where the bucket is full. It returns the
// state, the units it added (n, or the units missing from a fuller
// bucket, counting a unit partly refilled as missing), and the result of a
// read after it. n must be in [0, capacity].
func GiveToken(s TokenState, l Limit, now, n int64) (TokenState, int64, Result, error) {
	capacity := l.Capacity()
	if n < 0 || n > capacity {
		return s, 0, Result{Limit: capacity}, costError(n, capacity)
	}
	interval := l.interval()
	tau := capacity * interval
	eff := max(now, s.TAT-tau) // the clamp of TakeToken
	ahead := max(s.TAT-eff, 0)
	missing := capacity - (tau-ahead)/interval
	given := min(n, missing)
	if given > 0 {
		s.TAT = max(s.TAT-n*interval, eff)
	}
	s, res, err := TakeToken(s, l, now, 0)
	return s, given, res, err
}
