package store

import (
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// Bounds on an imported state (handoff, fetch): a state from another node
// is checked against them before it is applied (Import), since a state far
// in the future locks its key out and a huge one takes memory.
const (
	// ClockSkew is how far ahead of the receiver's clock an imported
	// timestamp that should be in the past (a window's start, a log
	// entry) may be: the nodes' clocks differ a little.
	ClockSkew = time.Minute
	// MaxLeaseTTL is the longest lease an imported state may hold (the
	// limiter's MaxLeaseTTL).
	MaxLeaseTTL = 24 * time.Hour
	// MaxImportLeases is the most leases one imported concurrency state
	// may hold.
	MaxImportLeases = 1 << 20
)

// Validate reports whether e is a state this node could have made itself
// at now: a known algorithm, its fields consistent, counts and costs
// within the limits package bucket allows, timestamps within a sane window
// of now (none in the future beyond ClockSkew, except expiries, which are
// at most a period or lease TTL ahead). The error wraps ErrInvalidEntry and
// names the field. A token bucket's TAT can only be bounded by the largest
// horizon here (bucket.MaxPeriod × 100); a take with the key's limit
// treats a TAT beyond that limit's horizon as an empty bucket.
func (e *Entry) Validate(now int64) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %#x: %s: %s", ErrInvalidEntry, e.Key, field, fmt.Sprintf(format, args...))
	}
	skew := now + int64(ClockSkew)
	switch e.Algorithm {
	case bucket.TokenBucket:
		if e.Token.TAT > now+(1+bucket.DebtBursts)*int64(100*bucket.MaxPeriod) {
			return bad("tat", "%d is more than %d × 100 × max period ahead of now %d", e.Token.TAT, 1+bucket.DebtBursts, now)
		}
	case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
		w := e.Window
		// A window admits at most its limit; fixed_window_hits counts
		// denied hits too, so only its sign is known.
		maxCount := int64((1 + bucket.DebtBursts) * bucket.MaxLimit) // a settle may go into debt
		if e.Algorithm == bucket.FixedWindowHits {
			maxCount = 1<<63 - 1
		}
		switch {
		case w.Start > skew:
			return bad("window_start", "%d is in the future (now %d)", w.Start, now)
		case w.Expires < w.Start:
			return bad("window_expires", "%d is before window_start %d", w.Expires, w.Start)
		case w.Expires-w.Start > 2*int64(bucket.MaxPeriod):
			return bad("window_expires", "%d is more than 2 × max period after window_start %d", w.Expires, w.Start)
		case w.Cur < 0 || w.Cur > maxCount:
			return bad("window_cur", "%d out of [0, %d]", w.Cur, maxCount)
		case w.Prev < 0 || w.Prev > maxCount:
			return bad("window_prev", "%d out of [0, %d]", w.Prev, maxCount)
		}
	case bucket.SlidingLog:
		if e.Period <= 0 || e.Period > int64(bucket.MaxPeriod) {
			return bad("period_ns", "%d out of [1, %d] for sliding_log", e.Period, int64(bucket.MaxPeriod))
		}
		if n := len(e.Log.Entries); n > bucket.MaxSlidingLogLimit {
			return bad("log_at", "%d entries, at most %d", n, bucket.MaxSlidingLogLimit)
		}
		for i, le := range e.Log.Entries {
			if le.At > skew {
				return bad(fmt.Sprintf("log_at[%d]", i), "%d is in the future (now %d)", le.At, now)
			}
			if le.Cost < 1 || le.Cost > bucket.MaxSlidingLogLimit {
				return bad(fmt.Sprintf("log_cost[%d]", i), "%d out of [1, %d]", le.Cost, bucket.MaxSlidingLogLimit)
			}
		}
	case bucket.Concurrency:
		if n := len(e.Leases.Leases); n > MaxImportLeases {
			return bad("lease_id", "%d leases, at most %d", n, MaxImportLeases)
		}
		for i, le := range e.Leases.Leases {
			if le.ID == 0 {
				return bad(fmt.Sprintf("lease_id[%d]", i), "must not be 0")
			}
			if le.Expires > skew+int64(MaxLeaseTTL) {
				return bad(fmt.Sprintf("lease_expires[%d]", i), "%d is more than the max lease TTL ahead of now %d", le.Expires, now)
			}
			if le.Cost < 1 || le.Cost > bucket.MaxLimit {
				return bad(fmt.Sprintf("lease_cost[%d]", i), "%d out of [1, %d]", le.Cost, int64(bucket.MaxLimit))
			}
		}
	default:
		return bad("algorithm", "unknown algorithm %v", e.Algorithm)
	}
	return e.validateResv(now, bad)
}

// validateResv checks e's reservations: at most MaxReservations, none
// ending more than the max lease TTL ahead, estimates and outcomes within
// package bucket's bounds.
func (e *Entry) validateResv(now int64, bad func(field, format string, args ...any) error) error {
	if n := len(e.Reservations); n > MaxReservations {
		return bad("resv_id", "%d reservations, at most %d", n, MaxReservations)
	}
	if len(e.Reservations) > 0 && (e.Algorithm == bucket.Concurrency || e.Algorithm == bucket.SlidingLog) {
		return bad("resv_id", "reservations on a %v key", e.Algorithm)
	}
	for i, r := range e.Reservations {
		if r.IsDebt() {
			if err := validateDebt(e, i, r, now, bad); err != nil {
				return err
			}
			continue
		}
		switch {
		case r.ID == 0:
			return bad(fmt.Sprintf("resv_id[%d]", i), "must not be 0")
		case r.Expires > now+int64(ClockSkew)+int64(MaxLeaseTTL):
			return bad(fmt.Sprintf("resv_expires[%d]", i), "%d is more than the max lease TTL ahead of now %d", r.Expires, now)
		case r.Estimate < 1 || r.Estimate > bucket.MaxHitsLimit:
			return bad(fmt.Sprintf("resv_estimate[%d]", i), "%d out of [1, %d]", r.Estimate, int64(bucket.MaxHitsLimit))
		case r.Actual < 0 || r.Refunded < 0 || r.Charged < 0 || r.Forgiven < 0:
			return bad(fmt.Sprintf("resv_actual[%d]", i), "negative outcome")
		}
	}
	return nil
}

// validateDebt checks the token debt record r, e's i-th reservation: on
// a token bucket key, its owner a valid capacity and interval, and its end
// at most (1+bucket.TokenDebtBursts) of the owner's horizons (and the
// clock skew) ahead of now, the bound a settle keeps to.
func validateDebt(e *Entry, i int, r bucket.Reservation, now int64, bad func(field, format string, args ...any) error) error {
	d := r.Debt()
	switch {
	case e.Algorithm != bucket.TokenBucket:
		return bad(fmt.Sprintf("resv_id[%d]", i), "a token debt on a %v key", e.Algorithm)
	case d.Capacity < 1 || d.Capacity > bucket.MaxLimit:
		return bad(fmt.Sprintf("resv_estimate[%d]", i), "debt capacity %d out of [1, %d]", d.Capacity, int64(bucket.MaxLimit))
	case d.Interval < 1 || d.Interval > int64(bucket.MaxPeriod):
		return bad(fmt.Sprintf("resv_window[%d]", i), "debt interval %d out of [1, %d]", d.Interval, int64(bucket.MaxPeriod))
	case d.Capacity > int64(100*bucket.MaxPeriod)/d.Interval:
		return bad(fmt.Sprintf("resv_window[%d]", i), "debt horizon %d × %d beyond 100 × max period", d.Capacity, d.Interval)
	case d.Until > now+int64(ClockSkew)+(1+bucket.TokenDebtBursts)*d.Capacity*d.Interval:
		return bad(fmt.Sprintf("resv_expires[%d]", i), "debt until %d is more than %d horizons of %d × %d ahead of now %d",
			d.Until, 1+bucket.TokenDebtBursts, d.Capacity, d.Interval, now)
	}
	return nil
}
