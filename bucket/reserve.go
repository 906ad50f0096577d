package bucket

import (
	"errors"
	"time"
)

// Reserve and settle: a caller that knows a cost only afterwards (an LLM
// gateway and its token counts) takes an estimate up front, as an ordinary
// take, and records a Reservation; Settle later applies the difference
// between the actual cost and the estimate to the same state. The take is
// the caller's (TakeToken, TakeFixedWindow, ...): this file holds the
// records and the settle arithmetic.

// DebtBursts is how far past its limit a settle may drive a window's
// count, in units of the limit: at most (1+DebtBursts) × Limit. Checks are
// denied until the window's end has paid the debt, and their RetryAfter
// says when. Excess beyond the bound is forgiven (Settlement.Forgiven).
const DebtBursts = 1

// TokenDebtBursts is the same bound for a token bucket, in bursts below
// empty: a settle may drive a bucket up to one burst (its capacity) below
// empty, and forgives the rest. The part below empty is a TokenDebt kept
// apart from the TAT and seen only by the limit that settled it (debt.go):
// the TAT stays within one horizon, so ClampToken's isolation bound holds
// for callers of every other limit on the key.
const TokenDebtBursts = 1

// ErrReservation is wrapped by the errors of this file.
var ErrReservation = errors.New("bucket: reservation")

// Reservation is an estimate taken on a key and not yet (or already)
// settled. It is kept until Expires (the reservation's TTL) either way:
// unsettled, it settles at its estimate when the TTL ends (the estimate
// was taken when it was made, so nothing changes); settled, it remembers
// the first settle's outcome so that a second settle is a no-op.
type Reservation struct {
	// ID and Tag are the reservation's 128-bit identifier (the store's
	// LeaseID); Holder binds it to a client identity (0 for none). This
	// package compares them and never reads them otherwise.
	ID, Tag, Holder uint64
	// Estimate is the cost taken when the reservation was made (> 0).
	Estimate int64
	// Window is the start of the window the estimate was taken in
	// (windows only; 0 for a token bucket).
	Window int64
	// Expires is when the reservation ends (unix ns): settled at its
	// estimate if still unsettled, forgotten either way.
	Expires int64
	// Settled says Settle has applied Actual.
	Settled bool
	// Actual is the settled cost, and Refunded, Charged and Forgiven the
	// first settle's outcome, repeated to a second settle.
	Actual, Refunded, Charged, Forgiven int64
}

// Settlement is the outcome of a settle.
type Settlement struct {
	// Refunded is the part of estimate-actual given back (less when the
	// state refilled meanwhile: a bucket is never fuller than full; 0 when
	// the reservation's window has ended).
	Refunded int64
	// Charged is the part of actual-estimate taken, Forgiven the rest of
	// it, beyond the debt bound (DebtBursts).
	Charged, Forgiven int64
	// Result is a read of the state after the settle.
	Result Result
}

// LiveReservations drops, in place, the reservations that ended by now
// (an unsettled one settles at its estimate: nothing to do).
func LiveReservations(rs []Reservation, now int64) []Reservation {
	out := rs[:0]
	for _, r := range rs {
		if r.Expires > now {
			out = append(out, r)
		}
	}
	clear(rs[len(out):])
	return out
}

// FindReservation returns the index of the live reservation id/tag/holder
// in rs, or -1.
func FindReservation(rs []Reservation, now int64, id, tag, holder uint64) int {
	for i, r := range rs {
		if r.ID == id && r.Tag == tag && r.Holder == holder && r.Expires > now && !r.IsDebt() {
			return i
		}
	}
	return -1
}

// SettleToken applies a reservation's actual cost to a token bucket that
// took estimate: actual < estimate moves TAT back (estimate-actual)
// intervals but never before now (a full bucket: the refund is capped by
// what is missing); actual > estimate moves TAT forward (actual-estimate)
// intervals from max(TAT, now), at most to now + (1+TokenDebtBursts)×Horizon
// (one burst below empty), and the rest is forgiven. s is the owner's view
// (with its debt) and so is the state returned, which may run beyond one
// horizon: SettleTokenDebt splits it into a TAT and a TokenDebt. Result is
// a read after it (Remaining 0 and ResetAfter counting the debt).
func SettleToken(s TokenState, l Limit, now, estimate, actual int64) (TokenState, Settlement) {
	interval := l.interval()
	tau := l.Capacity() * interval
	var st Settlement
	switch d := actual - estimate; {
	case d < 0:
		was := s.TAT
		s.TAT = max(s.TAT+d*interval, now)
		if was > now {
			st.Refunded = min(-d, (was-s.TAT+interval-1)/interval)
		}
	case d > 0:
		base := max(s.TAT, now)
		room := max(now+(1+TokenDebtBursts)*tau-base, 0) / interval
		st.Charged = min(d, room)
		st.Forgiven = d - st.Charged
		s.TAT = base + st.Charged*interval
	}
	st.Result = readToken(s, l, now)
	return s, st
}

// readToken is a read (cost 0) of a token bucket that may be in debt.
func readToken(s TokenState, l Limit, now int64) Result {
	interval := l.interval()
	tau := l.Capacity() * interval
	res := Result{Allowed: true, Limit: l.Capacity()}
	if ahead := s.TAT - now; ahead > 0 {
		res.ResetAfter = time.Duration(ahead)
		res.Remaining = max(tau-ahead, 0) / interval
	} else {
		res.Remaining = l.Capacity()
	}
	return res
}

// SettleWindow applies a reservation's actual cost to a fixed window (also
// fixed_window_hits and a calendar quota) or a sliding window that took
// estimate in the window starting at window. s must be the state as
// stored; l the limit it was taken under. When the reservation's window is
// the state's current window (or, for a sliding window, its previous one,
// whose count still weighs), the difference is applied to that window's
// count: a refund down to 0 at most, an excess up to (1+DebtBursts)×Limit
// with the rest forgiven. When that window has ended, the refund is
// dropped (the capacity it would restore is gone) and the excess is
// charged to the current window (the units were spent; counting them now
// errs on the side of denying), within the same bound.
func SettleWindow(s WindowState, l Limit, now, window, estimate, actual int64) (WindowState, Settlement) {
	sliding := l.Algorithm == SlidingWindow
	period := int64(l.Period)
	// Roll the state to the window of now without taking anything.
	var cur WindowState
	if sliding {
		cur, _, _ = TakeSlidingWindow(s, Limit{Algorithm: SlidingWindow, Limit: max(l.Limit, 1), Period: l.Period}, now, 0)
	} else {
		start, end, c := fixedWindow(s, l.Calendar, l.Zone, period, now)
		cur = WindowState{Start: start, Expires: end, Cur: c}
	}
	bound := (1 + DebtBursts) * max(l.Limit, 1)
	var st Settlement
	d := actual - estimate
	counter := &cur.Cur
	switch {
	case window == cur.Start:
	case sliding && window+period == cur.Start:
		counter = &cur.Prev
	default:
		if d < 0 {
			d = 0 // the window has ended: its refund is dropped
		}
	}
	switch {
	case d < 0:
		st.Refunded = min(-d, *counter)
		*counter -= st.Refunded
	case d > 0:
		st.Charged = min(d, max(bound-*counter, 0))
		st.Forgiven = d - st.Charged
		*counter += st.Charged
	}
	st.Result = readWindow(cur, l, now)
	return cur, st
}

// readWindow is a read of a rolled window state, which may be over its
// limit after a settle.
func readWindow(s WindowState, l Limit, now int64) Result {
	var res Result
	var err error
	if l.Algorithm == SlidingWindow {
		_, res, err = TakeSlidingWindow(s, l, now, 0)
	} else {
		_, res, err = TakeFixedWindow(s, Limit{Algorithm: FixedWindow, Limit: l.Limit, Period: l.Period, Calendar: l.Calendar, Zone: l.Zone}, now, 0)
	}
	if err != nil {
		return Result{Limit: l.Limit}
	}
	return res
}

// SettleRecord settles the reservation r with actual: the first time it
// calls apply (SettleToken or SettleWindow on the key's state, with r's
// estimate) and records the outcome in r; a later call applies nothing
// and returns the recorded outcome with already set, whatever its actual.
func SettleRecord(r *Reservation, actual int64, apply func(estimate, actual int64) Settlement) (st Settlement, already bool) {
	if r.Settled {
		return Settlement{Refunded: r.Refunded, Charged: r.Charged, Forgiven: r.Forgiven}, true
	}
	st = apply(r.Estimate, actual)
	r.Settled, r.Actual = true, actual
	r.Refunded, r.Charged, r.Forgiven = st.Refunded, st.Charged, st.Forgiven
	return st, false
}
