package bucket

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Calendar selects a calendar period: a limit with one resets at the
// period's boundaries in its Zone (midnight, Monday midnight, the first of
// the month, the first of January) instead of every Period. The zero value,
// NoCalendar, is a limit counted in durations.
type Calendar uint8

// The calendar periods.
const (
	NoCalendar Calendar = iota
	// Day runs from midnight to midnight: 23 or 25 hours on the days a
	// zone changes its offset for daylight saving time.
	Day
	// Week is the ISO 8601 week, from Monday midnight to Monday midnight.
	Week
	// Month runs from the first of a month to the first of the next.
	Month
	// Year runs from the first of January to the first of January.
	Year
)

// LastCalendar is the highest valid Calendar.
const LastCalendar = Year

var calendarNames = [...]string{Day: "day", Week: "week", Month: "month", Year: "year"}

// String returns the calendar's name as used in configuration ("day",
// "week", "month", "year"), or "" for NoCalendar.
func (c Calendar) String() string {
	if int(c) < len(calendarNames) {
		return calendarNames[c]
	}
	return fmt.Sprintf("calendar(%d)", uint8(c))
}

// ErrUnknownCalendar is wrapped by ParseCalendar's and LoadZone's errors.
var ErrUnknownCalendar = errors.New("bucket: unknown calendar")

// ParseCalendar maps "day", "week", "month" or "year" to a Calendar, and
// "" to NoCalendar.
func ParseCalendar(s string) (Calendar, error) {
	for c, name := range calendarNames {
		if name == s {
			return Calendar(c), nil
		}
	}
	return 0, fmt.Errorf("%w %q: want day, week, month or year", ErrUnknownCalendar, s)
}

// ErrUnknownZone is wrapped by LoadZone's errors.
var ErrUnknownZone = errors.New("bucket: unknown time zone")

// LoadZone returns the IANA time zone name ("Europe/Berlin"), with "" and
// "UTC" both UTC. "Local" is refused: a node's local zone is no part of a
// limit that several nodes and clients must agree on. The zones come from
// the system's zoneinfo or the Go tzdata embedded in the binary.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("%w %q: name an IANA zone such as Europe/Berlin", ErrUnknownZone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownZone, name)
	}
	return loc, nil
}

// CalendarWindow returns the calendar period of c in loc (nil is UTC) that
// holds the instant now (unix ns): start <= now < end, both unix ns. The
// boundaries are local midnights, so a day is 23 or 25 hours long across a
// daylight saving change, and a month 28 to 31 days. Where a zone skips a
// local midnight (a daylight saving change at 00:00), the period starts at
// the first instant of that local day. c must not be NoCalendar.
func CalendarWindow(c Calendar, loc *time.Location, now int64) (start, end int64) {
	if loc == nil {
		loc = time.UTC
	}
	t := time.Unix(0, now).In(loc)
	y, m, d := t.Date()
	switch c {
	case Week:
		d -= (int(t.Weekday()) + 6) % 7 // back to Monday
		return midnight(y, m, d, loc), midnight(y, m, d+7, loc)
	case Month:
		return midnight(y, m, 1, loc), midnight(y, m+1, 1, loc)
	case Year:
		return midnight(y, 1, 1, loc), midnight(y+1, 1, 1, loc)
	default:
		return midnight(y, m, d, loc), midnight(y, m, d+1, loc)
	}
}

// midnight returns the first instant of the local day y-m-d in loc (the
// date normalized as time.Date does), unix ns. Where the zone skips that
// midnight (the wall clock jumps from 23:59:59 to 01:00), time.Date may
// resolve it to an instant of the day before; the day then starts at the
// zone's change.
func midnight(y int, m time.Month, d int, loc *time.Location) int64 {
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if t.Hour() > 12 { // resolved into the day before
		if _, end := t.ZoneBounds(); !end.IsZero() {
			t = end
		}
	}
	return t.UnixNano()
}

// Zones caches LoadZone by name, for the decoders that meet a zone name on
// every request: time.LoadLocation reads and parses the zone's data on
// each call. Only zones that loaded are kept, so it holds at most the
// IANA database's few hundred names. The zero value is ready; it is safe
// for concurrent use.
type Zones struct {
	m sync.Map // name -> *time.Location
}

// Load is LoadZone, cached. A nil *Zones loads without a cache.
func (z *Zones) Load(name string) (*time.Location, error) {
	if z == nil {
		return LoadZone(name)
	}
	if name == "" || name == "UTC" {
		return time.UTC, nil
	}
	if loc, ok := z.m.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := LoadZone(name)
	if err != nil {
		return nil, err
	}
	z.m.Store(name, loc)
	return loc, nil
}
