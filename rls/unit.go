package rls

import (
	"strings"
	"time"
)

// Unit is a rate limit's unit of time. Its values are those of Envoy's
// envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit (and of
// envoy.type.v3.RateLimitUnit, which the reference casts to it), so a
// caller converts with a plain integer conversion.
type Unit int32

// The units, numbered as in Envoy's protos.
const (
	UnitUnknown Unit = 0
	UnitSecond  Unit = 1
	UnitMinute  Unit = 2
	UnitHour    Unit = 3
	UnitDay     Unit = 4
	UnitMonth   Unit = 5
	UnitYear    Unit = 6
	UnitWeek    Unit = 7
)

var unitNames = [...]string{
	UnitUnknown: "UNKNOWN",
	UnitSecond:  "SECOND",
	UnitMinute:  "MINUTE",
	UnitHour:    "HOUR",
	UnitDay:     "DAY",
	UnitMonth:   "MONTH",
	UnitYear:    "YEAR",
	UnitWeek:    "WEEK",
}

// String returns the unit's name in upper case, as Envoy's enum names it.
func (u Unit) String() string {
	if u >= 0 && int(u) < len(unitNames) {
		return unitNames[u]
	}
	return "UNKNOWN"
}

// ParseUnit maps a config's unit ("second", "Minute", "HOUR"... in any
// case) to a Unit, as the reference does: it reports false for an unknown
// name and for "unknown" itself.
func ParseUnit(s string) (Unit, bool) {
	up := strings.ToUpper(s)
	for u, name := range unitNames {
		if u != int(UnitUnknown) && name == up {
			return Unit(u), true
		}
	}
	return UnitUnknown, false
}

// Divider is the unit's length in seconds, the reference's
// UnitToDivider: a month is 30 days and a year 365. It is 0 for an unknown
// unit (where the reference panics).
func (u Unit) Divider() int64 {
	switch u {
	case UnitSecond:
		return 1
	case UnitMinute:
		return 60
	case UnitHour:
		return 60 * 60
	case UnitDay:
		return 60 * 60 * 24
	case UnitWeek:
		return 60 * 60 * 24 * 7
	case UnitMonth:
		return 60 * 60 * 24 * 30
	case UnitYear:
		return 60 * 60 * 24 * 365
	}
	return 0
}

// Period is the unit's length as a duration (0 for an unknown unit).
func (u Unit) Period() time.Duration { return time.Duration(u.Divider()) * time.Second }

// ResetAfter is the reference's duration_until_reset at unix time now (in
// whole seconds): the divider minus now modulo the divider, so a full unit
// at the very start of a window. It is 0 for an unknown unit.
func (u Unit) ResetAfter(now time.Time) int64 {
	d := u.Divider()
	if d == 0 {
		return 0
	}
	sec := now.Unix()
	r := sec % d
	if r < 0 {
		r += d
	}
	return d - r
}
