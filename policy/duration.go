package policy

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrDuration marks a string that ParseDuration rejects.
var ErrDuration = errors.New("policy: invalid duration")

// day is the length of a "d" unit. Days are fixed 24-hour spans: a limit
// period knows nothing of calendars or daylight saving.
const day = 24 * time.Hour

// ParseDuration parses a duration in Go syntax ("500ms", "1m", "1h30m", see
// time.ParseDuration) or a whole number of days ("1d", "7d"), as accepted by
// the policy file and the HTTP API. Days cannot be combined with other units.
// Errors wrap ErrDuration.
func ParseDuration(s string) (time.Duration, error) {
	if n, ok, err := parseDays(s); ok {
		return n, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w %s: want a number with a unit, e.g. 500ms, 1m, 1h30m or 7d", ErrDuration, Echo(s))
	}
	return d, nil
}

// parseDays handles the "[+-]Nd" form. ok reports whether s has that form
// (and so whether err is the final answer).
func parseDays(s string) (d time.Duration, ok bool, err error) {
	if len(s) < 2 || s[len(s)-1] != 'd' {
		return 0, false, nil
	}
	digits, neg := s[:len(s)-1], false
	switch digits[0] {
	case '-':
		digits, neg = digits[1:], true
	case '+':
		digits = digits[1:]
	}
	if digits == "" {
		return 0, false, nil
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, false, nil
		}
		if n > (math.MaxInt64/int64(day)-int64(c-'0'))/10 {
			return 0, true, fmt.Errorf("%w %s: too many days", ErrDuration, Echo(s))
		}
		n = n*10 + int64(c-'0')
	}
	d = time.Duration(n) * day
	if neg {
		d = -d
	}
	return d, true, nil
}
