package policy

import (
	"errors"
	"testing"

	"github.com/sluice-rl/sluice/bucket"
)

// FuzzParse checks that Parse never panics, that every error wraps
// ErrInvalid, and that every set it returns holds only valid policies.
func FuzzParse(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("policies:\n  api:\n    limit: 100\n    period: 1m\n    burst: 200\n"))
	f.Add([]byte("allow_inline: false\npolicies:\n  u: {algorithm: concurrency, limit: 4}\n"))
	f.Add([]byte("policies:\n  u: {algorithm: concurrency, limit: 4, max_ttl: 90s}\n"))
	f.Add([]byte("policies:\n  plan: {limit: 10000, calendar: month, timezone: Europe/Berlin}\n"))
	f.Add([]byte("policies:\n  d: {algorithm: fixed_window_hits, limit: 0, calendar: week, timezone: Asia/Kolkata}\n"))
	f.Add([]byte("policies:\n  d: {algorithm: sliding_window, limit: 1, period: 1d, calendar: year, timezone: UTC}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned a set and an error %v", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if s == nil {
			t.Fatal("Parse returned neither a set nor an error")
		}
		for _, name := range s.Names() {
			p, ok := s.Lookup(name)
			if !ok || p.Name != name {
				t.Fatalf("Lookup(%q) = %+v, %v", name, p, ok)
			}
			if !ValidName(name) {
				t.Fatalf("invalid name %q accepted", name)
			}
			if err := p.Limit.Validate(); err != nil {
				t.Fatalf("policy %q: %+v does not validate: %v", name, p.Limit, err)
			}
			if p.MaxTTL < 0 || p.MaxTTL > MaxLeaseTTL || p.MaxTTL != 0 && p.Limit.Algorithm != bucket.Concurrency {
				t.Fatalf("policy %q: max_ttl %v of %s", name, p.MaxTTL, p.Limit.Algorithm)
			}
			if l := p.Limit; l.Calendar != bucket.NoCalendar && (l.Period != 0 || l.Burst != 0) || l.Calendar == bucket.NoCalendar && l.Zone != nil {
				t.Fatalf("policy %q: calendar %v with period %v, burst %d, zone %v", name, l.Calendar, l.Period, l.Burst, l.Zone)
			}
			if p.FailureMode > FailAllow {
				t.Fatalf("policy %q: failure mode %d", name, p.FailureMode)
			}
		}
	})
}
