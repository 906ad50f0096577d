// Package bucket owns the rate-limit algorithms: token bucket (GCRA),
// sliding-window counter, fixed window, sliding log, concurrency leases and
// the fixed window of envoyproxy/ratelimit, which counts every hit
// (TakeFixedWindowHits).
//
// Every algorithm is a pure function of a state, a limit, the current time and
// a cost, in the style of golang.org/x/time/rate's AllowN(t, n):
//
//	next, res, err := bucket.TakeToken(state, limit, now, cost)
//
// returns the new state and the result. There are no locks, clocks, logging or
// metrics here: the caller (package store) keeps the state, holds whatever lock
// guards it and supplies the time. Times are nanoseconds since the Unix epoch;
// they must not be negative, and every computation stays inside int64 for
// times up to the year 2100 with any limit that passes [Limit.Validate].
// Callers pass a limit that already passed Validate; only the cost is checked.
//
// A limit may count calendar periods instead of a Period (Limit.Calendar,
// Limit.Zone): CalendarWindow is the boundary arithmetic, a pure function
// of the calendar, the zone and now; LoadZone and Zones load IANA zones
// (from the system's zoneinfo or the Go tzdata linked into the binary).
//
// Reserve and settle (reserve.go): a settle charging more than a state
// holds takes it into debt, bounded (DebtBursts, TokenDebtBursts), and
// forgives the rest. A window's debt is in its count; a token bucket's is
// a TokenDebt kept apart from its TAT and seen only by the limit that
// settled it (debt.go, TakeTokenDebt), so that ClampToken's bound for
// callers of other limits on a key holds.
//
// Rules shared by every algorithm (except the first two for
// TakeFixedWindowHits, which follows envoyproxy/ratelimit there: see it):
//   - a denied take consumes nothing, and neither does a read (cost 0, always
//     allowed, reporting Remaining and ResetAfter). The returned state then
//     behaves exactly like the input from now on: token buckets and sliding
//     logs return the input itself, windows are rolled forward to the window
//     of now, and expired leases are dropped. So a store may skip writing the
//     state back when nothing was consumed (!Allowed or cost 0);
//   - a negative cost is an error wrapping ErrNegativeCost and a cost larger
//     than the capacity an error wrapping ErrCostExceedsCapacity (never a deny
//     that would last forever); both leave the state unchanged, report only
//     Limit in the Result, and are *FieldError naming "cost";
//   - a state may outlive a change of its limit: the results stay well
//     formed (Remaining >= 0, reads allowed, RetryAfter exact), though the
//     state is read under the new limit (a window whose period changed
//     starts empty);
//   - a clock that steps backwards is clamped: time never runs backwards for
//     a state, so a backwards step can neither refill nor over-drain it. Each
//     algorithm clamps now to an "effective now" kept by its state (see
//     TakeToken, TakeFixedWindow, TakeSlidingWindow, TakeLog, Acquire), and
//     counts (Allowed, Remaining) are computed at the effective now. The
//     durations (ResetAfter, RetryAfter) are always measured from the
//     caller's now, so that now+RetryAfter is the exact instant, on the
//     caller's clock, at which the take would succeed. After a backwards step
//     they may therefore be longer than a period;
//   - a state whose ExpiresAt has passed (ExpiresAt <= now) carries no
//     information: every function treats it exactly as the zero state, so a
//     store may drop it without loss. (The clamp is anchored in the state,
//     so a state that was dropped cannot protect against a later backwards
//     step; that is the price of dropping.)
//
// Result fields: Allowed; Limit, the capacity that applied; Remaining, the
// units that could be spent now after this take (>= 0); ResetAfter, the time
// until the state is back to full (0 when it already is); RetryAfter, when
// denied, the exact time until the same cost would be admitted if nothing
// else is spent meanwhile (taking at now+RetryAfter succeeds, and at
// now+RetryAfter-1ns fails), 0 when allowed.
package bucket
