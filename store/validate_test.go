package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// Import refuses a state this node could not have made, naming the field,
// and applies nothing of it.
func TestImportValidates(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	far := now + int64(230*365*24*time.Hour) // beyond (1+DebtBursts) × 100 × MaxPeriod
	future := now + int64(time.Hour)
	for _, tc := range []struct {
		name  string
		e     Entry
		field string
	}{
		{"tat 230 years ahead", Entry{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: far}}, "tat"},
		{"window starts in the future", Entry{Key: 2, Algorithm: bucket.FixedWindow, Window: bucket.WindowState{Start: future, Expires: future + 1}}, "window_start"},
		{"window expires before it starts", Entry{Key: 3, Algorithm: bucket.SlidingWindow, Window: bucket.WindowState{Start: now, Expires: now - 1}}, "window_expires"},
		{"window lasts 3 years", Entry{Key: 4, Algorithm: bucket.FixedWindow, Window: bucket.WindowState{Start: now, Expires: now + int64(3*bucket.MaxPeriod)}}, "window_expires"},
		{"negative count", Entry{Key: 5, Algorithm: bucket.FixedWindowHits, Window: bucket.WindowState{Start: now, Expires: now + 1, Cur: -1}}, "window_cur"},
		{"count above any limit", Entry{Key: 12, Algorithm: bucket.SlidingWindow, Window: bucket.WindowState{Start: now, Expires: now + 1, Prev: (1+bucket.DebtBursts)*bucket.MaxLimit + 1}}, "window_prev"},
		{"log entry in the future", Entry{Key: 6, Algorithm: bucket.SlidingLog, Period: int64(time.Minute), Log: bucket.LogState{Entries: []bucket.LogEntry{{At: future, Cost: 1}}}}, "log_at[0]"},
		{"log cost 0", Entry{Key: 7, Algorithm: bucket.SlidingLog, Period: int64(time.Minute), Log: bucket.LogState{Entries: []bucket.LogEntry{{At: now, Cost: 0}}}}, "log_cost[0]"},
		{"log period 0", Entry{Key: 8, Algorithm: bucket.SlidingLog, Log: bucket.LogState{Entries: []bucket.LogEntry{{At: now, Cost: 1}}}}, "period_ns"},
		{"lease for a year", Entry{Key: 9, Algorithm: bucket.Concurrency, Leases: bucket.LeaseState{Leases: []bucket.Lease{{ID: 1, Cost: 1, Expires: now + int64(bucket.MaxPeriod)}}}}, "lease_expires[0]"},
		{"lease cost 0", Entry{Key: 10, Algorithm: bucket.Concurrency, Leases: bucket.LeaseState{Leases: []bucket.Lease{{ID: 1, Cost: 0, Expires: now + 1}}}}, "lease_cost[0]"},
		{"unknown algorithm", Entry{Key: 11, Algorithm: bucket.LastAlgorithm + 1}, "algorithm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Config{})
			err := s.Import(tc.e, now)
			if !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("Import: %v, want ErrInvalidEntry", err)
			}
			if want := ": " + tc.field + ": "; !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
			if k := s.Stats().Keys; k != 0 {
				t.Errorf("%d keys stored", k)
			}
		})
	}
}

// A token state further ahead than its limit allows (imported under
// another limit) reads as a bucket at its debt bound (one burst below
// empty, bucket.DebtBursts) that refills within twice the limit's horizon,
// and is counted in Stats().Clamped.
func TestTakeClampsTokenBeyondHorizon(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	s := newStore(t, Config{})
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Minute}
	if err := s.Import(Entry{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: now + int64(99*365*24*time.Hour)}}, now); err != nil {
		t.Fatal(err)
	}
	res, err := s.Take(1, l, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed || res.RetryAfter > time.Minute+time.Second || res.ResetAfter > 2*time.Minute {
		t.Fatalf("take: %+v, want denied with a retry after under a minute and a second", res)
	}
	if c := s.Stats().Clamped; c != 1 {
		t.Fatalf("Clamped = %d, want 1", c)
	}
	// Within the horizon: kept as is.
	if err := s.Import(Entry{Key: 2, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: now + int64(30*time.Second)}}, now); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.Take(2, l, now, 0); res.ResetAfter != 30*time.Second {
		t.Fatalf("a state within the horizon was changed: %+v", res)
	}
}

// The attack on one key: a caller with limit 1 burst 61 per minute
// takes 61; a caller with 3/min on the same key and period then waits at
// most its own debt bound and emission interval (1m20s), not the
// attacker's hour.
func TestTakeClampsOtherLimitsState(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	s := newStore(t, Config{})
	attacker := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 1, Burst: 61, Period: time.Minute}
	victim := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 3, Period: time.Minute}
	if res, err := s.Take(1, attacker, now, 61); err != nil || !res.Allowed {
		t.Fatalf("attacker: %+v, %v", res, err)
	}
	res, err := s.Take(1, victim, now, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.RetryAfter > 80*time.Second || res.ResetAfter > 2*time.Minute {
		t.Fatalf("victim locked out: %+v, want a retry within 1m20s and a reset within 2m", res)
	}
	res, err = s.Take(1, victim, now+int64(80*time.Second), 1)
	if err != nil || !res.Allowed {
		t.Fatalf("victim after its own interval: %+v, %v", res, err)
	}
}
