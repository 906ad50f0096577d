package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/bucket"
)

func TestParseCalendar(t *testing.T) {
	s, err := Parse([]byte(`
policies:
  plan:
    limit: 10000
    calendar: month
    timezone: Europe/Berlin
  daily:
    algorithm: fixed_window
    limit: 100
    calendar: day
  rls-style:
    algorithm: fixed_window_hits
    limit: 5
    calendar: week
    timezone: Asia/Kolkata
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		alg  bucket.Algorithm
		cal  bucket.Calendar
		zone string
	}{
		"plan":      {bucket.TokenBucket, bucket.Month, "Europe/Berlin"},
		"daily":     {bucket.FixedWindow, bucket.Day, "UTC"},
		"rls-style": {bucket.FixedWindowHits, bucket.Week, "Asia/Kolkata"},
	} {
		p, _ := s.Lookup(name)
		if l := p.Limit; l.Algorithm != want.alg || l.Calendar != want.cal || l.Zone.String() != want.zone || l.Period != 0 {
			t.Errorf("%s: %+v (zone %v), want %v %v in %s", name, l, l.Zone, want.alg, want.cal, want.zone)
		}
	}
	// The set's hash changes with the calendar and the zone.
	h := map[string]string{}
	for _, f := range []string{
		"policies:\n  p: {limit: 1, calendar: day}\n",
		"policies:\n  p: {limit: 1, calendar: month}\n",
		"policies:\n  p: {limit: 1, calendar: day, timezone: Europe/Berlin}\n",
		"policies:\n  p: {limit: 1, period: 24h}\n",
	} {
		s, err := Parse([]byte(f))
		if err != nil {
			t.Fatal(err)
		}
		if other, dup := h[s.Hash()]; dup {
			t.Errorf("%q and %q share a hash", f, other)
		}
		h[s.Hash()] = f
	}
}

// TestParseCalendarInvalid is the bad-input table of the calendar fields:
// each error names the field.
func TestParseCalendarInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
		err              error
	}{
		{"unknown calendar", "policies:\n  p:\n    limit: 5\n    calendar: fortnight\n", "line 4: policies.p.calendar: unknown calendar \"fortnight\" (want day, week, month or year)", bucket.ErrUnknownCalendar},
		{"empty calendar", "policies:\n  p:\n    limit: 5\n    calendar: \"\"\n", "policies.p.calendar: unknown calendar \"\"", bucket.ErrUnknownCalendar},
		{"calendar not a string", "policies:\n  p:\n    limit: 5\n    calendar: [day]\n", "policies.p.calendar: must be a string", nil},
		{"unknown zone", "policies:\n  p:\n    limit: 5\n    calendar: day\n    timezone: Europe/Atlantis\n", "line 5: policies.p.timezone: unknown time zone \"Europe/Atlantis\"", bucket.ErrUnknownZone},
		{"Local zone", "policies:\n  p:\n    limit: 5\n    calendar: day\n    timezone: Local\n", "policies.p.timezone: unknown time zone \"Local\"", bucket.ErrUnknownZone},
		{"zone path", "policies:\n  p:\n    limit: 5\n    calendar: day\n    timezone: ../../etc/passwd\n", "policies.p.timezone: unknown time zone", bucket.ErrUnknownZone},
		{"zone without calendar", "policies:\n  p:\n    limit: 5\n    period: 1m\n    timezone: Europe/Berlin\n", "policies.p.timezone: needs a calendar", bucket.ErrInvalidLimit},
		{"period with calendar", "policies:\n  p:\n    limit: 5\n    period: 30d\n    calendar: month\n", "policies.p.period: must be empty with a calendar", bucket.ErrInvalidLimit},
		{"burst with calendar", "policies:\n  p:\n    limit: 5\n    burst: 10\n    calendar: month\n", "policies.p.burst: must be empty with a calendar", bucket.ErrInvalidLimit},
		{"sliding_window", "policies:\n  p:\n    algorithm: sliding_window\n    limit: 5\n    calendar: day\n", "policies.p.calendar: not with algorithm sliding_window", bucket.ErrInvalidLimit},
		{"sliding_log", "policies:\n  p:\n    algorithm: sliding_log\n    limit: 5\n    calendar: day\n", "policies.p.calendar: not with algorithm sliding_log", bucket.ErrInvalidLimit},
		{"concurrency", "policies:\n  p:\n    algorithm: concurrency\n    limit: 5\n    calendar: day\n", "policies.p.calendar: not with algorithm concurrency", bucket.ErrInvalidLimit},
		{"duplicate calendar", "policies:\n  p: {limit: 5, calendar: day, calendar: month}\n", "policies.p.calendar: already given", nil},
		{"long zone", "policies:\n  p:\n    limit: 5\n    calendar: day\n    timezone: " + strings.Repeat("Z", 5000) + "\n", "…(5000 bytes)", bucket.ErrUnknownZone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.file))
			if err == nil {
				t.Fatalf("Parse succeeded (%v), want an error containing %q", s.Names(), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) || tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("error %v does not wrap ErrInvalid and %v", err, tc.err)
			}
		})
	}
}
