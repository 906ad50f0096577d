package bucket

import (
	"math"
	"time"
)

// TakeFixedWindowHits counts cost hits in a fixed window, the way
// envoyproxy/ratelimit counts them in Redis (INCRBY key hits, then
// "over the limit" when the count after it exceeds the limit): windows of
// length l.Period aligned to the Unix epoch or calendar periods, as for
// TakeFixedWindow, and
//
//	count' = count + cost, always; allowed iff count' <= Limit.
//
// It departs from the rules shared by the other algorithms in three ways,
// all of them the reference's:
//   - a denied take consumes: its hits count against the takes after it in
//     the window (a client that keeps calling while over the limit stays
//     over the limit until the window ends);
//   - a cost larger than the limit is no error: it is counted and denied;
//   - a read (cost 0) is denied when the window is already over its limit
//     (count > Limit), as the reference answers a hits_addend of 0.
//
// A Limit of 0 denies every take of cost > 0. The count saturates at
// math.MaxInt64 instead of overflowing.
//
// Clamp: as for TakeFixedWindow, now is treated as at least s.Start. The
// returned state is rolled to the window of the effective now, with
// Expires = the window's end.
//
// Remaining is max(0, Limit-count'), Count is count'; ResetAfter is the time until the
// window ends, 0 when it holds nothing; when denied, RetryAfter is the time
// until the window ends (when the count starts again from 0).
func TakeFixedWindowHits(s WindowState, l Limit, now, cost int64) (WindowState, Result, error) {
	limit := l.Limit
	if cost < 0 {
		return s, Result{Limit: limit}, costError(cost, limit)
	}
	start, end, cur := fixedWindow(s, l.Calendar, l.Zone, int64(l.Period), now)
	if cur > math.MaxInt64-cost {
		cur = math.MaxInt64
	} else {
		cur += cost
	}
	res := Result{Limit: limit, Allowed: cur <= limit, Remaining: max(limit-cur, 0), Count: cur}
	if !res.Allowed {
		res.RetryAfter = time.Duration(end - now)
	}
	if cur > 0 {
		res.ResetAfter = time.Duration(end - now)
	}
	return WindowState{Start: start, Expires: end, Cur: cur}, res, nil
}
