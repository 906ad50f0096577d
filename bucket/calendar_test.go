package bucket

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// at parses an RFC 3339 instant to unix ns.
func at(t *testing.T, s string) int64 {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return ts.UnixNano()
}

// TestCalendarWindowSteps is the boundary arithmetic at the named
// instants: the period holding now, written in the zone's own offsets, and
// its length (23 and 25 hour days, 28/29-day Februaries, a year's turn).
func TestCalendarWindowSteps(t *testing.T) {
	const h, d = time.Hour, 24 * time.Hour
	for _, tc := range []struct {
		name       string
		cal        Calendar
		zone       string
		now        string
		start, end string
		length     time.Duration
	}{
		{"Berlin spring forward, before", Day, "Europe/Berlin", "2026-03-29T01:59:59+01:00", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23 * h},
		{"Berlin spring forward, after", Day, "Europe/Berlin", "2026-03-29T03:00:00+02:00", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23 * h},
		{"Berlin day before spring forward", Day, "Europe/Berlin", "2026-03-28T23:59:59.999999999+01:00", "2026-03-28T00:00:00+01:00", "2026-03-29T00:00:00+01:00", 24 * h},
		{"Berlin fall back, first 02:30", Day, "Europe/Berlin", "2026-10-25T02:30:00+02:00", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25 * h},
		{"Berlin fall back, second 02:30", Day, "Europe/Berlin", "2026-10-25T02:30:00+01:00", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25 * h},
		{"Berlin fall back, last instant", Day, "Europe/Berlin", "2026-10-25T23:59:59.999999999+01:00", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25 * h},
		{"Berlin midnight belongs to the new day", Day, "Europe/Berlin", "2026-10-26T00:00:00+01:00", "2026-10-26T00:00:00+01:00", "2026-10-27T00:00:00+01:00", 24 * h},
		{"Berlin month with spring forward", Month, "Europe/Berlin", "2026-03-15T12:00:00+01:00", "2026-03-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00", 31*d - h},
		{"Berlin month with fall back", Month, "Europe/Berlin", "2026-10-31T23:00:00+01:00", "2026-10-01T00:00:00+02:00", "2026-11-01T00:00:00+01:00", 31*d + h},
		{"February, non-leap", Month, "UTC", "2026-02-28T23:59:59Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", 28 * d},
		{"February, leap", Month, "UTC", "2028-02-29T12:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", 29 * d},
		{"February, leap, Berlin", Month, "Europe/Berlin", "2028-02-01T00:00:00+01:00", "2028-02-01T00:00:00+01:00", "2028-03-01T00:00:00+01:00", 29 * d},
		{"Dec -> Jan, month", Month, "UTC", "2026-12-31T23:59:59.999999999Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", 31 * d},
		{"Dec -> Jan, month, new year", Month, "UTC", "2027-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z", 31 * d},
		{"year", Year, "UTC", "2026-07-01T00:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", 365 * d},
		{"leap year, Berlin", Year, "Europe/Berlin", "2028-12-31T23:59:59+01:00", "2028-01-01T00:00:00+01:00", "2029-01-01T00:00:00+01:00", 366 * d},
		{"Berlin year's turn in UTC is still the old year", Year, "Europe/Berlin", "2026-12-31T23:30:00Z", "2027-01-01T00:00:00+01:00", "2028-01-01T00:00:00+01:00", 365 * d},
		{"ISO week crossing a year (week 53 of 2026)", Week, "UTC", "2026-12-31T12:00:00Z", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", 7 * d},
		{"ISO week crossing a year, in January", Week, "UTC", "2027-01-03T23:59:59Z", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", 7 * d},
		{"ISO week starts Monday", Week, "UTC", "2027-01-04T00:00:00Z", "2027-01-04T00:00:00Z", "2027-01-11T00:00:00Z", 7 * d},
		{"Sunday is the week's last day", Week, "Europe/Berlin", "2026-03-29T12:00:00+02:00", "2026-03-23T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 7*d - h},
		{"New York spring forward", Day, "America/New_York", "2026-03-08T12:00:00-04:00", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00", 23 * h},
		{"New York week with fall back", Week, "America/New_York", "2026-11-01T01:30:00-05:00", "2026-10-26T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 7*d + h},
		{"Los Angeles day, UTC already tomorrow", Day, "America/Los_Angeles", "2026-06-16T03:00:00Z", "2026-06-15T00:00:00-07:00", "2026-06-16T00:00:00-07:00", 24 * h},
		{"Kolkata half-hour offset", Day, "Asia/Kolkata", "2026-06-14T18:29:59Z", "2026-06-14T00:00:00+05:30", "2026-06-15T00:00:00+05:30", 24 * h},
		{"Kolkata half-hour offset, next day", Day, "Asia/Kolkata", "2026-06-14T18:30:00Z", "2026-06-15T00:00:00+05:30", "2026-06-16T00:00:00+05:30", 24 * h},
		{"Adelaide half-hour zone, DST ends in April", Month, "Australia/Adelaide", "2026-04-05T02:30:00+09:30", "2026-04-01T00:00:00+10:30", "2026-05-01T00:00:00+09:30", 30*d + h},
		{"Adelaide DST ends", Day, "Australia/Adelaide", "2026-04-05T12:00:00+09:30", "2026-04-05T00:00:00+10:30", "2026-04-06T00:00:00+09:30", 25 * h},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := at(t, tc.now)
			start, end := CalendarWindow(tc.cal, zone(t, tc.zone), now)
			if ws, we := at(t, tc.start), at(t, tc.end); start != ws || end != we {
				t.Errorf("%v in %s at %s = [%s, %s), want [%s, %s)", tc.cal, tc.zone, tc.now,
					time.Unix(0, start).UTC().Format(time.RFC3339), time.Unix(0, end).UTC().Format(time.RFC3339),
					time.Unix(0, ws).UTC().Format(time.RFC3339), time.Unix(0, we).UTC().Format(time.RFC3339))
			}
			if got := time.Duration(end - start); got != tc.length {
				t.Errorf("length %v, want %v", got, tc.length)
			}
		})
	}
}

// TestCalendarWindowTiles checks over random instants that the periods
// tile time: start <= now < end, the period of start is the same one, and
// the period of end begins at end. The zones include ones whose daylight
// saving changes skip or repeat a local midnight (America/Havana,
// America/Santiago, Asia/Beirut).
func TestCalendarWindowTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := at(t, "2020-01-01T00:00:00Z"), at(t, "2032-01-01T00:00:00Z")
	for _, name := range []string{"UTC", "Europe/Berlin", "America/Havana", "America/Santiago", "Asia/Beirut", "Asia/Kolkata", "Australia/Adelaide", "Pacific/Chatham"} {
		loc := zone(t, name)
		for c := Day; c <= LastCalendar; c++ {
			for range 2000 {
				now := lo + rng.Int64N(hi-lo)
				start, end := CalendarWindow(c, loc, now)
				if !(start <= now && now < end) {
					t.Fatalf("%v %s at %d: [%d, %d) does not hold now", c, name, now, start, end)
				}
				if s2, e2 := CalendarWindow(c, loc, start); s2 != start || e2 != end {
					t.Fatalf("%v %s: the period of its start %d is [%d, %d), not [%d, %d)", c, name, start, s2, e2, start, end)
				}
				if s3, _ := CalendarWindow(c, loc, end); s3 != end {
					t.Fatalf("%v %s: the period after [%d, %d) starts at %d", c, name, start, end, s3)
				}
			}
		}
	}
}

// TestCalendarFixedWindowSteps takes through Berlin's spring-forward and
// fall-back days: ResetAfter and RetryAfter run to the next local
// midnight, 23 and 25 hours after the last.
func TestCalendarFixedWindowSteps(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	const h, m = time.Hour, time.Minute
	{
		l := Limit{Algorithm: FixedWindow, Limit: 3, Calendar: Day, Zone: berlin}
		runSteps(t, TakeFixedWindow, l, WindowState{}, []step{
			{t: at(t, "2026-03-29T01:30:00+01:00"), cost: 3, allowed: true, remaining: 0, resetAfter: 21*h + 30*m},
			// 03:30 CEST is one hour of wall clock after 01:30 CET... and
			// one hour of real time: the next midnight is 20h30m away.
			{t: at(t, "2026-03-29T03:30:00+02:00"), cost: 0, allowed: true, remaining: 0, resetAfter: 20*h + 30*m},
			{t: at(t, "2026-03-29T23:59:59.999999999+02:00"), cost: 0, allowed: true, remaining: 0, resetAfter: 1},
			{t: at(t, "2026-03-30T00:00:00+02:00"), cost: 1, allowed: true, remaining: 2, resetAfter: 24 * h},
			// Fall back: the day holds 25 hours.
			{t: at(t, "2026-10-25T00:00:00+02:00"), cost: 3, allowed: true, remaining: 0, resetAfter: 25 * h},
			{t: at(t, "2026-10-25T02:30:00+01:00"), cost: 0, allowed: true, remaining: 0, resetAfter: 21*h + 30*m},
			// The clock steps back into the previous day: clamped, the
			// old day does not reopen.
			{t: at(t, "2026-10-24T23:00:00+02:00"), cost: 0, allowed: true, remaining: 0, resetAfter: 26 * h},
			{t: at(t, "2026-10-26T00:00:00+01:00"), cost: 0, allowed: true, remaining: 3},
		}, func(i int, s WindowState) {
			if s2, e2 := CalendarWindow(Day, berlin, s.Start); s2 != s.Start || e2 != s.Expires || s.Prev != 0 {
				t.Errorf("step %d: state %+v is not a Berlin day", i, s)
			}
		})
	}
	// fixed_window_hits counts on the same days.
	hits := Limit{Algorithm: FixedWindowHits, Limit: 1, Calendar: Day, Zone: berlin}
	s, _, _ := TakeFixedWindowHits(WindowState{}, hits, at(t, "2026-10-25T00:30:00+02:00"), 1)
	s, res, _ := TakeFixedWindowHits(s, hits, at(t, "2026-10-25T23:00:00+01:00"), 1)
	if res.Allowed || res.Count != 2 || res.RetryAfter != h || res.ResetAfter != h {
		t.Errorf("hits at 23:00 on the 25-hour day: %+v, want denied, count 2, retry and reset in 1h", res)
	}
	if _, res, _ = TakeFixedWindowHits(s, hits, at(t, "2026-10-26T00:00:00+01:00"), 1); !res.Allowed || res.Count != 1 {
		t.Errorf("hits on the next day: %+v, want allowed, count 1", res)
	}
	// A deny's RetryAfter is the time to the boundary, here across a
	// February's end in a leap year.
	l := Limit{Algorithm: FixedWindow, Limit: 2, Calendar: Month}
	runSteps(t, TakeFixedWindow, l, WindowState{}, []step{
		{t: at(t, "2028-02-01T00:00:00Z"), cost: 2, allowed: true, remaining: 0, resetAfter: 29 * 24 * time.Hour},
		{t: at(t, "2028-02-28T00:00:00Z"), cost: 1, remaining: 0, resetAfter: 48 * time.Hour, retryAfter: 48 * time.Hour},
		{t: at(t, "2028-03-01T00:00:00Z"), cost: 1, allowed: true, remaining: 1, resetAfter: 31 * 24 * time.Hour},
	}, nil)
}

func TestCalendarValidate(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	for _, tc := range []struct {
		l     Limit
		field string
		err   error
	}{
		{Limit{Algorithm: SlidingWindow, Limit: 1, Calendar: Day}, "calendar", ErrInvalidLimit},
		{Limit{Algorithm: SlidingLog, Limit: 1, Calendar: Day}, "calendar", ErrInvalidLimit},
		{Limit{Algorithm: Concurrency, Limit: 1, Calendar: Day}, "calendar", ErrInvalidLimit},
		{Limit{Algorithm: FixedWindow, Limit: 1, Calendar: LastCalendar + 1}, "calendar", ErrUnknownCalendar},
		{Limit{Algorithm: FixedWindow, Limit: 1, Calendar: Day, Period: time.Hour}, "period", ErrInvalidLimit},
		{Limit{Algorithm: TokenBucket, Limit: 1, Calendar: Day, Burst: 2}, "burst", ErrInvalidLimit},
		{Limit{Algorithm: FixedWindow, Limit: 1, Period: time.Hour, Zone: berlin}, "timezone", ErrInvalidLimit},
		{Limit{Algorithm: FixedWindow, Limit: 0, Calendar: Day}, "limit", ErrInvalidLimit},
	} {
		err := tc.l.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, tc.err) {
			t.Errorf("%+v: err = %v, want field %q wrapping %v", tc.l, err, tc.field, tc.err)
		}
	}
	for _, l := range []Limit{
		{Algorithm: FixedWindow, Limit: 1, Calendar: Day},
		{Algorithm: FixedWindowHits, Limit: 0, Calendar: Year, Zone: berlin},
		{Algorithm: TokenBucket, Limit: 10, Calendar: Month, Zone: berlin},
	} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	if _, err := ParseCalendar("fortnight"); !errors.Is(err, ErrUnknownCalendar) {
		t.Errorf("ParseCalendar(fortnight) = %v", err)
	}
	for _, name := range []string{"Local", "Mars/Olympus", "../etc/passwd"} {
		if _, err := LoadZone(name); !errors.Is(err, ErrUnknownZone) {
			t.Errorf("LoadZone(%q) = %v", name, err)
		}
	}
}
