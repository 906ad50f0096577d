package bucket

import (
	"errors"
	"fmt"
	"time"
)

// Algorithm selects how a Limit counts.
type Algorithm uint8

// The algorithms. The zero value is not valid; callers map "unspecified" to
// TokenBucket before validating.
const (
	TokenBucket Algorithm = iota + 1
	SlidingWindow
	FixedWindow
	SlidingLog
	Concurrency
	// FixedWindowHits is a fixed window that counts every hit, admitted
	// or not, as envoyproxy/ratelimit counts in Redis (see
	// TakeFixedWindowHits).
	FixedWindowHits
)

// LastAlgorithm is the highest valid Algorithm, for tables indexed by it.
const LastAlgorithm = FixedWindowHits

var algorithmNames = [...]string{
	TokenBucket:   "token_bucket",
	SlidingWindow: "sliding_window",
	FixedWindow:   "fixed_window",
	SlidingLog:    "sliding_log",
	Concurrency:   "concurrency",
	// The name says what sets it apart from fixed_window: hits count
	// whether or not they are admitted.
	FixedWindowHits: "fixed_window_hits",
}

// String returns the algorithm's snake_case name, as used in configuration.
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) && algorithmNames[a] != "" {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ParseAlgorithm maps a name ("token_bucket", "sliding_window",
// "fixed_window", "sliding_log", "concurrency", "fixed_window_hits") to an
// Algorithm. The empty
// string is TokenBucket, the default.
func ParseAlgorithm(s string) (Algorithm, error) {
	if s == "" {
		return TokenBucket, nil
	}
	for a, name := range algorithmNames {
		if name != "" && name == s {
			return Algorithm(a), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownAlgorithm, s)
}

// Bounds on a Limit. They keep every computation inside int64 nanoseconds.
const (
	// MaxPeriod is the longest period a limit may have.
	MaxPeriod = 366 * 24 * time.Hour
	// MaxLimit is the largest limit (and burst) a limit may have.
	MaxLimit = 1_000_000_000
	// MaxSlidingLogLimit caps the limit of a sliding log, whose state keeps
	// one timestamp per admitted unit (8 bytes each).
	MaxSlidingLogLimit = 10_000
	// MaxHitsLimit is the largest limit of a fixed_window_hits limit: the
	// largest requests_per_unit of envoyproxy/ratelimit (a uint32). It
	// is the one algorithm whose limit may exceed MaxLimit (a count needs
	// no arithmetic that could overflow) and may be 0 (every hit denied).
	MaxHitsLimit = 1<<32 - 1
)

// Sentinel errors. Errors returned by this package wrap one of them.
var (
	ErrUnknownAlgorithm    = errors.New("bucket: unknown algorithm")
	ErrInvalidLimit        = errors.New("bucket: invalid limit")
	ErrCostExceedsCapacity = errors.New("bucket: cost exceeds capacity")
	ErrNegativeCost        = errors.New("bucket: negative cost")
)

// Limit is the definition of a limit: N units per period.
type Limit struct {
	// Algorithm selects the counting method.
	Algorithm Algorithm
	// Limit is the number of units per Period (for Concurrency: the number
	// of units that may be held at once). 1..MaxLimit; for
	// FixedWindowHits 0..MaxHitsLimit.
	Limit int64
	// Period is the refill period or window length. 1ns..MaxPeriod.
	// Concurrency limits ignore it.
	Period time.Duration
	// Burst is the token bucket's capacity; 0 means Limit. Other algorithms
	// ignore it.
	Burst int64
	// Calendar, when set, replaces Period by calendar periods in Zone (see
	// CalendarWindow): Period and Burst must then be 0. It applies to
	// FixedWindow, FixedWindowHits and TokenBucket; a TokenBucket with a
	// Calendar is a quota of Limit units per period, full at each boundary
	// and spent down within it, which is exactly a fixed window: it is
	// taken with TakeFixedWindow and kept in a WindowState.
	Calendar Calendar
	// Zone is the calendar's time zone (LoadZone); nil is UTC. Only with a
	// Calendar.
	Zone *time.Location
}

// FieldError is a validation error that names the offending field.
type FieldError struct {
	Field  string // e.g. "limit", "period", "burst"
	Reason string // e.g. "must be > 0"
	Err    error  // the sentinel it wraps
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }
func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks the limit against the bounds above. Errors are *FieldError
// naming "algorithm", "limit", "period", "burst", "calendar" or "timezone".
func (l Limit) Validate() error { return l.validate() }

// validate is Validate on a pointer: a Limit is too large for the compiler
// to keep in registers, and each value-receiver call would copy it.
func (l *Limit) validate() error {
	if err := l.validateLimit(); err != nil {
		return err
	}
	if l.Calendar != NoCalendar || l.Zone != nil {
		return l.validateCalendar()
	}
	switch {
	case l.Algorithm != Concurrency && l.Period <= 0:
		return &FieldError{"period", "must be > 0", ErrInvalidLimit}
	case l.Period < 0:
		return &FieldError{"period", "must be >= 0", ErrInvalidLimit}
	case l.Period > MaxPeriod:
		return &FieldError{"period", "must be <= 366 days", ErrInvalidLimit}
	case l.Burst < 0:
		return &FieldError{"burst", "must be >= 0", ErrInvalidLimit}
	case l.Burst > MaxLimit:
		return &FieldError{"burst", fmt.Sprintf("must be <= %d", MaxLimit), ErrInvalidLimit}
	}
	if l.Algorithm == TokenBucket {
		// capacity * emission interval must fit comfortably in int64 ns.
		capacity := l.Limit
		if l.Burst > 0 {
			capacity = l.Burst
		}
		interval := (int64(l.Period) + l.Limit - 1) / l.Limit // Limit.interval
		if interval*capacity > int64(100*MaxPeriod) || interval*capacity/capacity != interval {
			return &FieldError{"burst", "burst/limit × period must be <= 100 years", ErrInvalidLimit}
		}
	}
	return nil
}

// validateCalendar checks a calendar limit's fields.
func (l *Limit) validateCalendar() error {
	switch {
	case l.Calendar == NoCalendar:
		return &FieldError{"timezone", "needs a calendar", ErrInvalidLimit}
	case l.Calendar > LastCalendar:
		return &FieldError{"calendar", fmt.Sprintf("unknown calendar %d", l.Calendar), ErrUnknownCalendar}
	case l.Algorithm != TokenBucket && l.Algorithm != FixedWindow && l.Algorithm != FixedWindowHits:
		return &FieldError{"calendar", "not with algorithm " + l.Algorithm.String() + ": only token_bucket, fixed_window and fixed_window_hits", ErrInvalidLimit}
	case l.Period != 0:
		return &FieldError{"period", "must be empty with a calendar, which sets the period", ErrInvalidLimit}
	case l.Burst != 0:
		return &FieldError{"burst", "must be empty with a calendar (the quota is the limit)", ErrInvalidLimit}
	}
	return nil
}

// IsQuota reports whether l is a token bucket with a calendar, a quota
// taken as a fixed window (see Limit.Calendar).
func (l Limit) IsQuota() bool { return l.Algorithm == TokenBucket && l.Calendar != NoCalendar }

// validateLimit checks the algorithm and the limit.
func (l *Limit) validateLimit() error {
	switch {
	case l.Algorithm < TokenBucket || l.Algorithm > LastAlgorithm:
		return &FieldError{"algorithm", fmt.Sprintf("unknown algorithm %d", l.Algorithm), ErrUnknownAlgorithm}
	case l.Algorithm == FixedWindowHits:
		if l.Limit < 0 {
			return &FieldError{"limit", "must be >= 0", ErrInvalidLimit}
		}
		if l.Limit > MaxHitsLimit {
			return &FieldError{"limit", fmt.Sprintf("must be <= %d for fixed_window_hits", MaxHitsLimit), ErrInvalidLimit}
		}
	case l.Limit <= 0:
		return &FieldError{"limit", "must be > 0", ErrInvalidLimit}
	case l.Limit > MaxLimit:
		return &FieldError{"limit", fmt.Sprintf("must be <= %d", MaxLimit), ErrInvalidLimit}
	case l.Algorithm == SlidingLog && l.Limit > MaxSlidingLogLimit:
		return &FieldError{"limit", fmt.Sprintf("must be <= %d for sliding_log", MaxSlidingLogLimit), ErrInvalidLimit}
	}
	return nil
}

// Capacity is the most units that can be spent at once: Burst (or Limit when
// Burst is 0) for a token bucket, Limit for every other algorithm.
func (l Limit) Capacity() int64 {
	if l.Algorithm == TokenBucket && l.Burst > 0 {
		return l.Burst
	}
	return l.Limit
}

// interval is the token bucket's emission interval, Period/Limit rounded up
// so that rounding can only under-admit, never overshoot.
func (l Limit) interval() int64 {
	return (int64(l.Period) + l.Limit - 1) / l.Limit
}

// Result is the outcome of a take.
type Result struct {
	// Allowed reports whether the cost was admitted (and consumed).
	Allowed bool
	// Limit is the capacity that applied.
	Limit int64
	// Remaining is the number of units that could be spent now, after this take.
	Remaining int64
	// ResetAfter is the time until the state is back to full (empty window).
	ResetAfter time.Duration
	// RetryAfter is, when denied, the time until the same cost could be
	// admitted if nothing else is spent meanwhile; 0 when allowed.
	RetryAfter time.Duration
	// Count is, for FixedWindowHits, the window's count after the take
	// (denied hits included), which tells by how much a denied take went
	// over; 0 for the other algorithms, and when unknown.
	Count int64
}

// costError is the error for a cost outside [0, capacity]: a negative cost,
// or one that could never be admitted because it exceeds the capacity. Both
// are *FieldError naming "cost". Callers test the range inline and call it
// only when the cost is out of range, keeping the fast path free of calls.
func costError(cost, capacity int64) error {
	if cost < 0 {
		return &FieldError{"cost", "must be >= 0", ErrNegativeCost}
	}
	return &FieldError{"cost", fmt.Sprintf("%d exceeds the capacity %d", cost, capacity), ErrCostExceedsCapacity}
}

// Horizon is how far ahead of now a token bucket's TAT may legitimately
// run under l: capacity × emission interval (GCRA's tau), the time an empty
// bucket takes to refill. A state further ahead was made under another
// limit or is corrupt.
func (l Limit) Horizon() time.Duration { return time.Duration(l.Capacity() * l.interval()) }
