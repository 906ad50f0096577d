package bucket

import (
	"math/bits"
	"time"
)

// WindowState is the state of a fixed window or a sliding-window counter.
type WindowState struct {
	// Start is the unix-nanosecond start of the current window, aligned to
	// the period (Start % Period == 0), or for a calendar limit the
	// period's first instant in its zone.
	Start int64
	// Expires is when the state stops carrying information (for a fixed
	// window the end of the current window, which for a calendar limit is
	// the next boundary, for a sliding window the end of
	// the window after it).
	Expires int64
	// Prev is the count of the previous window (sliding window only).
	Prev int64
	// Cur is the count of the current window.
	Cur int64
}

// ExpiresAt is the instant from which the state equals the zero state.
func (s WindowState) ExpiresAt() int64 { return s.Expires }

// advanceWindow returns the effective now, max(now, s.Start), and the start
// of the aligned window that holds it, together with the state's counts
// rolled into that window: unchanged in the same window, Prev=Cur and Cur=0
// one window later, both 0 two or more windows later. An expired state is
// treated as the zero state first.
func advanceWindow(s WindowState, period, now int64) (eff, start, prev, cur int64) {
	if s.Expires <= now {
		s = WindowState{}
	}
	eff = max(now, s.Start)
	start = eff - eff%period
	switch start - s.Start {
	case 0:
		prev, cur = s.Prev, s.Cur
	case period:
		prev, cur = s.Cur, 0
	}
	return eff, start, prev, cur
}

// TakeFixedWindow spends cost units from a fixed window: windows of length
// l.Period aligned to the Unix epoch (Start = now - now%Period), or with a
// Calendar the calendar periods of l.Zone (see CalendarWindow), each
// admitting at most l.Limit units. A take is allowed iff Cur+cost <= Limit.
//
// Clamp: now is treated as at least s.Start, so a backwards clock step into an
// earlier window counts against the current window and cannot reopen the
// earlier one. The returned state is always rolled to the window of the
// effective now, with Expires = the window's end (a read or a deny may return such
// a rolled state: it behaves exactly like the input).
//
// Remaining is Limit-Cur; ResetAfter is the time until the window ends (0
// when it holds nothing); when denied, RetryAfter is the time until the
// window ends, after which any cost <= Limit is admitted.
func TakeFixedWindow(s WindowState, l Limit, now, cost int64) (WindowState, Result, error) {
	limit := l.Limit
	if cost < 0 || cost > limit {
		return s, Result{Limit: limit}, costError(cost, limit)
	}
	start, end, cur := fixedWindow(s, l.Calendar, l.Zone, int64(l.Period), now)
	res := Result{Limit: limit}
	if cost == 0 || cur+cost <= limit {
		res.Allowed = true
		cur += cost
	} else {
		res.RetryAfter = time.Duration(end - now)
	}
	res.Remaining = max(limit-cur, 0) // cur > limit only if the limit was lowered
	if cur > 0 {
		res.ResetAfter = time.Duration(end - now)
	}
	return WindowState{Start: start, Expires: end, Cur: cur}, res, nil
}

// fixedWindow returns the window of a fixed window's effective now,
// max(now, s.Start), and the count it holds: s.Cur in the same window, 0
// in a later one (or when s has expired). The windows are the calendar
// periods of cal in loc, or without a calendar the period-aligned windows.
// It takes the limit's fields, not the Limit: a Limit is too large for the
// compiler to keep in registers, and passing it on copies it.
func fixedWindow(s WindowState, cal Calendar, loc *time.Location, period, now int64) (start, end, cur int64) {
	if cal == NoCalendar {
		_, start, _, cur = advanceWindow(s, period, now)
		return start, start + period, cur
	}
	if s.Expires <= now {
		s = WindowState{}
	}
	eff := max(now, s.Start)
	if s.Start <= eff && eff < s.Expires {
		return s.Start, s.Expires, s.Cur // the period of s: no zone arithmetic
	}
	start, end = CalendarWindow(cal, loc, eff)
	return start, end, 0
}

// TakeSlidingWindow spends cost units from a sliding-window counter. Windows
// are aligned as for a fixed window; the usage at now is estimated as
//
//	estimate = ceil(Prev × (Period-elapsed) / Period) + Cur, elapsed = now-Start
//
// (the previous window's count weighted by how much of it still overlaps the
// period ending now, rounded up so that the estimate errs on the side of
// denying) and a take is allowed iff estimate+cost <= Limit. The state keeps
// two counters; Expires = Start + 2×Period.
//
// Bound: every aligned window admits at most Limit units, and any interval of
// length Period admits fewer than 2×Limit (at most Limit + Prev×elapsed/Period
// for an interval ending elapsed into a window, so strictly less than twice
// the limit in the worst case, when the previous window's traffic all came at
// its very end). With traffic spread over the previous window it is close to
// Limit.
//
// Clamp: now is treated as at least s.Start, as for a fixed window. Within the
// current window a backwards step is not clamped; it only raises the estimate
// (more of Prev still counts), so it errs on the side of denying.
//
// Remaining is Limit-estimate (>= 0). ResetAfter is the time until the
// estimate falls to 0: the end of the next window if Cur > 0, else the end of
// the current window if Prev > 0, else 0. When denied, RetryAfter is the
// exact time until the estimate admits the cost, which may fall in the next
// window. The returned state is always rolled to the window of the effective
// now.
func TakeSlidingWindow(s WindowState, l Limit, now, cost int64) (WindowState, Result, error) {
	limit := l.Limit
	if cost < 0 || cost > limit {
		return s, Result{Limit: limit}, costError(cost, limit)
	}
	period := int64(l.Period)
	eff, start, prev, cur := advanceWindow(s, period, now)
	est := cur
	if prev > 0 {
		est += mulDiv(prev, start+period-eff, period, true)
	}
	res := Result{Limit: limit}
	// After a backwards step within the window (or if the limit was lowered)
	// est may exceed the limit; a read is allowed all the same.
	if cost == 0 || est+cost <= limit {
		res.Allowed = true
		cur += cost
		est += cost
	} else {
		res.RetryAfter = time.Duration(slidingRetryAt(start, period, prev, cur, limit, cost) - now)
	}
	res.Remaining = max(limit-est, 0)
	switch {
	case cur > 0:
		res.ResetAfter = time.Duration(start + 2*period - now)
	case prev > 0:
		res.ResetAfter = time.Duration(start + period - now)
	}
	return WindowState{Start: start, Expires: start + 2*period, Prev: prev, Cur: cur}, res, nil
}

// slidingRetryAt is the earliest instant at which a sliding window holding
// prev and cur in the window beginning at start admits cost, given that it
// does not at the effective now. The result lies in (eff, start+2×period].
func slidingRetryAt(start, period, prev, cur, limit, cost int64) int64 {
	// In the current window at instant t the estimate is
	// ceil(prev×(start+period-t)/period) + cur, which admits cost iff
	// prev×(start+period-t) <= room×period with room = limit-cost-cur, that
	// is iff start+period-t <= floor(room×period/prev). Since it does not
	// admit at eff, room < prev and the quotient is < period.
	if room := limit - cost - cur; room > 0 && prev > 0 {
		if q := mulDiv(room, period, prev, false); q > 0 {
			return start + period - q
		}
	}
	// In the next window Prev becomes cur and Cur 0: the estimate at t is
	// ceil(cur×(start+2×period-t)/period), which admits cost iff
	// start+2×period-t <= floor(room×period/cur) with room = limit-cost >= 0.
	room := limit - cost
	if room >= cur {
		return start + period
	}
	return start + 2*period - mulDiv(room, period, cur, false)
}

// mulDiv returns a×b/c rounded down, or up when ceil is set, for a, b >= 0
// and c > 0, without overflowing the product. The quotient must fit an int64.
func mulDiv(a, b, c int64, ceil bool) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, r := bits.Div64(hi, lo, uint64(c))
	if ceil && r != 0 {
		q++
	}
	return int64(q)
}
