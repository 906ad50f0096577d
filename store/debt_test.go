package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// A token bucket settled into debt on one store: a check under its limit
// is denied for the debt, one under another limit on the key only for its
// own window; the debt moves with the key (Extract then Import, and
// ExportChanged then Replace on an heir) and refill pays it.
func TestTokenDebtMovesWithKey(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: 10 * time.Second} // T = 1s, horizon 10s
	other := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 5, Period: 5 * time.Second}
	a := newStore(t, Config{TrackChanges: true})
	id, _, err := a.Reserve(1, l, now, 10, time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.Settle(1, l, now, id, 25)
	if err != nil || st.Charged != 10 || st.Forgiven != 5 || st.Result.ResetAfter != 20*time.Second {
		t.Fatalf("settle 25 of 10: %+v %v, want 10 charged into debt, 5 forgiven, reset 20s", st, err)
	}
	wantDenied := func(s *Store, name string, at int64, retry time.Duration) {
		t.Helper()
		res, err := s.Take(1, l, at, 1)
		if err != nil || res.Allowed || res.RetryAfter != retry || res.Remaining != 0 {
			t.Errorf("%s: %+v %v, want denied, retry %v", name, res, err, retry)
		}
	}
	wantDenied(a, "owner", now, 11*time.Second)
	if res, _ := a.Take(1, other, now, 1); res.Allowed || res.RetryAfter != time.Second || res.ResetAfter > 5*time.Second {
		t.Errorf("other limit: %+v, want denied for one interval, reset within its own horizon", res)
	}
	// Replication: an heir's copy holds the debt.
	heir := newStore(t, Config{})
	a.ExportChanged(now, func(e Entry) bool {
		if err := heir.Replace(e, now); err != nil {
			t.Fatal(err)
		}
		return true
	})
	wantDenied(heir, "heir", now+2*sec, 9*time.Second)
	// Handoff: Extract then Import.
	b := newStore(t, Config{})
	for _, e := range a.Extract(now+sec, []uint64{1}) {
		if err := b.Import(e, now+sec); err != nil {
			t.Fatal(err)
		}
	}
	if res, _ := a.Take(1, l, now+sec, 10); !res.Allowed {
		t.Errorf("the old owner after Extract: %+v, want the key forgotten", res)
	}
	wantDenied(b, "new owner", now+5*sec, 6*time.Second)
	wantDenied(b, "debt paid, bucket empty", now+10*sec, time.Second)
	if res, _ := b.Take(1, l, now+11*sec, 1); !res.Allowed {
		t.Errorf("after the debt and a unit of refill: %+v, want allowed", res)
	}
	b.Sweep(now + 21*sec)
	for _, r := range b.resv[b.shardIndex(1)][1].list {
		if r.IsDebt() {
			t.Errorf("debt record %+v left after the debt ended", r)
		}
	}
	checkResvBytes(t, a)
	checkResvBytes(t, b)
	checkResvBytes(t, heir)
}

// An imported debt beyond the bound a settle keeps to (one burst below
// empty, bucket.TokenDebtBursts) is refused, naming the field.
func TestImportBoundsTokenDebt(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	debt := bucket.TokenDebt{Capacity: 10, Interval: int64(time.Second), Until: now + 20*sec}
	if err := newStore(t, Config{}).Import(Entry{Key: 1, Algorithm: bucket.TokenBucket, Reservations: []bucket.Reservation{debt.Record()}}, now); err != nil {
		t.Fatalf("a debt of one burst: %v", err)
	}
	for _, tc := range []struct {
		name  string
		alg   bucket.Algorithm
		d     func(*bucket.TokenDebt)
		field string
	}{
		{"beyond one burst", bucket.TokenBucket, func(d *bucket.TokenDebt) { d.Until = now + int64(ClockSkew) + 20*sec + 1 }, "resv_expires[0]"},
		{"no capacity", bucket.TokenBucket, func(d *bucket.TokenDebt) { d.Capacity = 0 }, "resv_estimate[0]"},
		{"no interval", bucket.TokenBucket, func(d *bucket.TokenDebt) { d.Interval = 0 }, "resv_window[0]"},
		{"huge horizon", bucket.TokenBucket, func(d *bucket.TokenDebt) { d.Capacity, d.Interval = bucket.MaxLimit, int64(bucket.MaxPeriod) }, "resv_window[0]"},
		{"on a window", bucket.FixedWindow, func(*bucket.TokenDebt) {}, "resv_id[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := debt
			tc.d(&d)
			e := Entry{Key: 1, Algorithm: tc.alg, Reservations: []bucket.Reservation{d.Record()}}
			err := newStore(t, Config{}).Import(e, now)
			if !errors.Is(err, ErrInvalidEntry) || !strings.Contains(err.Error(), ": "+tc.field+": ") {
				t.Errorf("Import: %v, want ErrInvalidEntry naming %s", err, tc.field)
			}
		})
	}
}

// Reset sets the state whatever it owed; a refund pays the debt first;
// no reservation ID settles the debt record.
func TestTokenDebtResetAndRefund(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: 10 * time.Second}
	s := newStore(t, Config{})
	big, _, _ := s.Reserve(1, l, now, 4, time.Minute, 0)
	small, _, _ := s.Reserve(1, l, now, 6, time.Minute, 0)
	if st, _ := s.Settle(1, l, now, big, 10); st.Charged != 6 { // 6 below empty
		t.Fatalf("settle 10 of 4: %+v", st)
	}
	if _, err := s.Settle(1, l, now, LeaseID{ID: bucket.DebtID, Tag: bucket.DebtTag}, 0); !errors.Is(err, ErrUnknownReservation) {
		t.Errorf("settle of the debt record: %v, want ErrUnknownReservation", err)
	}
	// 6 refunded: the debt is paid, the bucket back at empty.
	if st, _ := s.Settle(1, l, now, small, 0); st.Refunded != 6 || st.Result.ResetAfter != 10*time.Second {
		t.Errorf("refund of 6: %+v, want the debt of 6 paid (reset 10s)", st)
	}
	if res, _ := s.Take(1, l, now, 1); res.RetryAfter != time.Second {
		t.Errorf("after the refund: %+v, want retry 1s (empty, no debt)", res)
	}
	id, _, _ := s.Reserve(1, l, now+10*sec, 10, time.Minute, 0)
	if st, _ := s.Settle(1, l, now+10*sec, id, 20); st.Charged != 10 {
		t.Fatalf("settle 20 of 10: %+v", st)
	}
	if err := s.Reset(1, l, now+10*sec, 10); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.Take(1, l, now+10*sec, 10); !res.Allowed {
		t.Errorf("after Reset to full: %+v, want the debt gone", res)
	}
	s.Sweep(now + 10*sec)
	checkResvBytes(t, s)
}

// checkResvBytes fails the test if Stats().Bytes disagrees with the maps
// and the reservation sets (their debt records included).
func checkResvBytes(t *testing.T, s *Store) {
	t.Helper()
	_, bytes := recount(s)
	for i := range s.resv {
		for _, set := range s.resv[i] {
			bytes += set.size()
		}
	}
	if got := s.Stats().Bytes; got != bytes {
		t.Errorf("Stats().Bytes %d, maps and reservations hold %d", got, bytes)
	}
}
