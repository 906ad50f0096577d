package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// Reserve, settle and the records' lifetime on one store.
func TestReserveSettle(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	s := newStore(t, Config{TrackChanges: true})
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Minute}
	id, res, err := s.Reserve(1, l, now, 100, time.Minute, 0)
	if err != nil || !res.Allowed || id.IsZero() {
		t.Fatalf("reserve: %v %+v %v", id, res, err)
	}
	st, err := s.Settle(1, l, now, id, 40)
	if err != nil || st.Already || st.Refunded != 60 || st.Result.Remaining != 60 {
		t.Fatalf("settle 40: %+v %v", st, err)
	}
	again, err := s.Settle(1, l, now, id, 300)
	if err != nil || !again.Already || again.Actual != 40 || again.Refunded != 60 || again.Result.Remaining != 60 {
		t.Fatalf("settle again: %+v %v, want already settled at 40 and nothing changed", again, err)
	}
	// Another key, another holder, a guess: unknown.
	for _, tc := range []struct {
		key uint64
		id  LeaseID
	}{{2, id}, {1, LeaseID{ID: id.ID, Tag: id.Tag, Holder: 9}}, {1, LeaseID{ID: id.ID, Tag: id.Tag + 1}}} {
		if _, err := s.Settle(tc.key, l, now, tc.id, 1); !errors.Is(err, ErrUnknownReservation) {
			t.Errorf("settle key %d id %+v: %v, want ErrUnknownReservation", tc.key, tc.id, err)
		}
	}
	// Unsettled past its TTL: settled at its estimate, then forgotten.
	id2, _, _ := s.Reserve(1, l, now, 50, time.Second, 0)
	later := now + int64(time.Second)
	if _, err := s.Settle(1, l, later, id2, 0); !errors.Is(err, ErrUnknownReservation) {
		t.Errorf("settle after the TTL: %v, want ErrUnknownReservation", err)
	}
	if res, _ := s.Take(1, l, later, 0); res.Remaining != 11 { // 60-50 left at now, +1.67 refilled in 1s
		t.Errorf("after the TTL: remaining %d, want 11 (the estimate of 50 stands)", res.Remaining)
	}
	// Sliding logs and concurrency limits do not reserve.
	for _, alg := range []bucket.Algorithm{bucket.SlidingLog, bucket.Concurrency} {
		if _, _, err := s.Reserve(3, bucket.Limit{Algorithm: alg, Limit: 10, Period: time.Minute}, now, 1, time.Minute, 0); !errors.Is(err, ErrWrongAlgorithm) {
			t.Errorf("%v: %v, want ErrWrongAlgorithm", alg, err)
		}
	}
}

// A denied reserve takes nothing and records nothing.
func TestReserveDenied(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	s := newStore(t, Config{})
	l := bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 100, Period: time.Minute}
	if _, res, _ := s.Reserve(1, l, now, 80, time.Minute, 0); !res.Allowed {
		t.Fatal("first reserve denied")
	}
	id, res, err := s.Reserve(1, l, now, 30, time.Minute, 0)
	if err != nil || res.Allowed || !id.IsZero() || res.RetryAfter <= 0 {
		t.Fatalf("reserve past the limit: %v %+v %v", id, res, err)
	}
	if res, _ := s.Take(1, l, now, 0); res.Remaining != 20 {
		t.Errorf("remaining %d, want 20", res.Remaining)
	}
}

// Reservations move with their key: Extract gives them (settled or not)
// and Import on another store merges them, so a settle there works and a
// second settle is still a no-op. ExportChanged (replication) carries them.
func TestReservationsMoveWithKey(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Minute}
	a := newStore(t, Config{TrackChanges: true})
	open, _, _ := a.Reserve(1, l, now, 50, time.Minute, 0)
	done, _, _ := a.Reserve(1, l, now, 10, time.Minute, 0)
	if _, err := a.Settle(1, l, now, done, 5); err != nil {
		t.Fatal(err)
	}
	var replicated int
	a.ExportChanged(now, func(e Entry) bool {
		replicated += len(e.Reservations)
		return true
	})
	if replicated != 2 {
		t.Errorf("ExportChanged carried %d reservations, want 2", replicated)
	}
	moved := a.Extract(now, []uint64{1})
	if len(moved) != 1 || len(moved[0].Reservations) != 2 {
		// One entry per key: a peer that predates reservations takes at
		// most one state per key it fetches.
		t.Fatalf("Extract: %+v, want the key's state carrying its 2 reservations", moved)
	}
	b := newStore(t, Config{})
	for _, e := range moved {
		if err := b.Import(e, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Settle(1, l, now, open, 40); !errors.Is(err, ErrUnknownReservation) {
		t.Errorf("settle on the old store: %v, want ErrUnknownReservation", err)
	}
	st, err := b.Settle(1, l, now, open, 40)
	if err != nil || st.Already || st.Refunded != 10 || st.Result.Remaining != 55 {
		t.Errorf("settle on the new store: %+v %v, want 10 refunded, 55 left", st, err)
	}
	st, err = b.Settle(1, l, now, done, 5)
	if err != nil || !st.Already {
		t.Errorf("the settled reservation after the move: %+v %v, want already settled", st, err)
	}
	// Sweep forgets them at their TTL.
	b.Sweep(now + int64(time.Minute))
	if set := b.resv[b.shardIndex(1)][1]; set != nil {
		n := len(set.list)
		t.Errorf("%d reservations left after their TTL", n)
	}
}

// Entry.Validate refuses reservations this node could not have made.
func TestImportValidatesReservations(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	ok := bucket.Reservation{ID: 1, Tag: 1, Estimate: 10, Expires: now + int64(time.Minute)}
	for _, tc := range []struct {
		name  string
		alg   bucket.Algorithm
		r     func(*bucket.Reservation)
		field string
	}{
		{"id 0", bucket.TokenBucket, func(r *bucket.Reservation) { r.ID = 0 }, "resv_id[0]"},
		{"estimate 0", bucket.TokenBucket, func(r *bucket.Reservation) { r.Estimate = 0 }, "resv_estimate[0]"},
		{"two days", bucket.FixedWindow, func(r *bucket.Reservation) { r.Expires = now + int64(48*time.Hour) }, "resv_expires[0]"},
		{"negative actual", bucket.TokenBucket, func(r *bucket.Reservation) { r.Settled, r.Actual = true, -1 }, "resv_actual[0]"},
		{"on a log", bucket.SlidingLog, func(*bucket.Reservation) {}, "resv_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.r(&r)
			e := Entry{Key: 1, Algorithm: tc.alg, Period: int64(time.Minute), Reservations: []bucket.Reservation{r}}
			err := newStore(t, Config{}).Import(e, now)
			if !errors.Is(err, ErrInvalidEntry) || !strings.Contains(err.Error(), ": "+tc.field+": ") {
				t.Errorf("Import: %v, want ErrInvalidEntry naming %s", err, tc.field)
			}
		})
	}
}

// A key whose state has refilled but whose reservation is live is held:
// Has says so, so that a fetch or handoff takes the reservation along.
func TestHasCountsReservations(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	s := newStore(t, Config{})
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Second}
	if _, _, err := s.Reserve(1, l, now, 10, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	later := now + int64(2*time.Second) // the bucket is full again
	if !s.Has(later, 1) {
		t.Error("Has: false for a key with a live reservation")
	}
	if s.Has(now+int64(time.Minute), 1) {
		t.Error("Has: true after the reservation's TTL")
	}
}

// A key whose state refilled keeps its live reservations in an entry of
// their own, which Import takes.
func TestReservationsWithoutState(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Second}
	a := newStore(t, Config{})
	id, _, _ := a.Reserve(1, l, now, 10, time.Minute, 0)
	later := now + int64(2*time.Second)
	var got []Entry
	a.Export(later, nil, func(e Entry) bool { got = append(got, e); return true })
	if len(got) != 1 || len(got[0].Reservations) != 1 || got[0].Token.TAT != 0 {
		t.Fatalf("Export: %+v, want one entry of the reservation alone", got)
	}
	b := newStore(t, Config{})
	if err := b.Import(got[0], later); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Settle(1, l, later, id, 10); err != nil || st.Already {
		t.Fatalf("settle on the importer: %+v %v", st, err)
	}
}

// BenchmarkReserveSettle is one reserve and its settle on a token bucket,
// against a plain take (BenchmarkTakeToken) for the cost of the record:
// 1,024 keys, a reservation every millisecond, so each key holds about 60
// live (settled ones are kept until their 1-minute TTL).
func BenchmarkReserveSettle(b *testing.B) {
	s := newStore(b, Config{})
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: bucket.MaxLimit, Period: time.Second}
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := uint64(i % 1024)
		id, _, err := s.Reserve(key, l, now, 10, time.Minute, 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Settle(key, l, now, id, 5); err != nil {
			b.Fatal(err)
		}
		now += int64(time.Millisecond)
	}
}

// Reservations count in the store's estimated memory, and give it back
// when they end or move.
func TestReservationBytes(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).UnixNano()
	s := newStore(t, Config{})
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Hour}
	if _, _, err := s.Reserve(1, l, now, 1, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	base := s.Stats().Bytes
	for range 9 {
		if _, _, err := s.Reserve(1, l, now, 1, time.Minute, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats().Bytes - base; got != 9*resvItemBytes {
		t.Errorf("9 more reservations: %d bytes, want %d", got, 9*resvItemBytes)
	}
	s.Sweep(now + int64(time.Minute))
	s.Extract(now+int64(time.Minute), []uint64{1})
	if b := s.Stats().Bytes; b != 0 {
		t.Errorf("after the TTL and the extract: %d bytes, want 0", b)
	}
	if _, _, err := s.Reserve(2, l, now, 1, time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	s.Extract(now, []uint64{2})
	if b := s.Stats().Bytes; b != 0 {
		t.Errorf("after moving key 2 away: %d bytes, want 0", b)
	}
}
