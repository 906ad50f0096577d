package persist_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/persist"
	"github.com/sluice-rl/sluice/store"
)

func fixedClock() time.Time { return time.Unix(0, now) }

func newWriter(t *testing.T, db *persist.DB, cfg persist.WriterConfig) *persist.Writer {
	t.Helper()
	cfg.Clock = fixedClock
	w, err := persist.NewWriter(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func openDB(t *testing.T) *persist.DB {
	t.Helper()
	db, err := persist.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// run starts w.Run and returns its stop, which waits for it to end.
func run(t *testing.T, w *persist.Writer) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, time.Hour); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestWriterMergesBatches shows that batches merge (a key's latest
// state wins) and that Flush writes what Run left queued.
func TestWriterMergesBatches(t *testing.T) {
	db := openDB(t)
	w := newWriter(t, db, persist.WriterConfig{Interval: time.Hour})
	stop := run(t, w)
	es := entries()
	w.Add(es[:2])
	late := es[0]
	late.Token.TAT += 1e9
	w.Add([]store.Entry{late})
	stop()
	if st := w.Stats(); st.Pending != 2 || st.Writes != 0 {
		t.Fatalf("before the interval: %+v, want 2 pending, no write", st)
	}
	if err := w.Flush(); err != nil { // the graceful stop's last write
		t.Fatal(err)
	}
	got, st := load(t, db, now)
	if st.Loaded != 2 || got[0].Token != late.Token {
		t.Fatalf("after stop: %+v (%+v), want 2 states, key 1 at its later state", got, st)
	}
	if s := w.Stats(); s.Written != 2 || s.Writes != 1 || s.Failed != 0 || s.Pending != 0 {
		t.Fatalf("stats: %+v, want 2 written in 1 write", s)
	}
}

// Run writes every Interval, one transaction for all that was added.
func TestWriterWritesEveryInterval(t *testing.T) {
	db := openDB(t)
	w := newWriter(t, db, persist.WriterConfig{Interval: 10 * time.Millisecond})
	run(t, w)
	w.Add(entries()[:3])
	poll(t, "3 states written", func() bool { return w.Stats().Written == 3 })
	if n, _ := db.Len(); n != 3 {
		t.Fatalf("%d records on disk, want 3", n)
	}
}

// A pending set that reaches MaxPending is written at once, not at the
// interval's end.
func TestWriterWritesEarlyWhenFull(t *testing.T) {
	db := openDB(t)
	w := newWriter(t, db, persist.WriterConfig{Interval: time.Hour, MaxPending: 3})
	run(t, w)
	w.Add(entries()[:2])
	if st := w.Stats(); st.Writes != 0 || st.Pending != 2 {
		t.Fatalf("below MaxPending: %+v, want 2 pending, no write", st)
	}
	w.Add(entries()[2:3])
	poll(t, "the full set written", func() bool { s := w.Stats(); return s.Writes == 1 && s.Written == 3 })
}

// SyncedAt moves to the latest round marked before a write that
// succeeded, or before a write with nothing to do; a failed write leaves
// it.
func TestWriterSyncedAt(t *testing.T) {
	db := openDB(t)
	w := newWriter(t, db, persist.WriterConfig{Interval: time.Hour})
	t0 := w.Stats().SyncedAt
	r1 := t0.Add(time.Second)
	w.Add(entries()[:1])
	w.MarkRound(r1)
	if got := w.Stats().SyncedAt; !got.Equal(t0) {
		t.Fatalf("before the write: SyncedAt %v, want %v", got, t0)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats().SyncedAt; !got.Equal(r1) {
		t.Fatalf("after the write: SyncedAt %v, want the round %v", got, r1)
	}
	r2 := r1.Add(time.Second)
	w.MarkRound(r2)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats().SyncedAt; !got.Equal(r2) {
		t.Fatalf("nothing to write: SyncedAt %v, want the round %v", got, r2)
	}
	// A failed write (the file closed) keeps its states and SyncedAt.
	w.Add(entries()[1:2])
	w.MarkRound(r2.Add(time.Second))
	db.Close()
	if err := w.Flush(); err == nil {
		t.Fatal("a write to a closed database succeeded")
	}
	if s := w.Stats(); !s.SyncedAt.Equal(r2) || s.Pending != 1 || s.Failed != 1 {
		t.Fatalf("after a failed write: %+v, want SyncedAt %v, 1 pending, 1 failed", s, r2)
	}
}

// After Abandon (a crash), nothing more reaches the disk.
func TestWriterAbandon(t *testing.T) {
	db := openDB(t)
	w := newWriter(t, db, persist.WriterConfig{})
	w.Add(entries()[:1])
	w.Abandon()
	w.Add(entries()[1:2])
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _ := db.Len(); n != 0 {
		t.Fatalf("%d states on disk after Abandon, want 0", n)
	}
}

func TestNewWriterBadInput(t *testing.T) {
	db := openDB(t)
	for _, tc := range []struct {
		name string
		cfg  persist.WriterConfig
		want string
	}{
		{"negative interval", persist.WriterConfig{Interval: -time.Second}, "Interval"},
		{"interval over an hour", persist.WriterConfig{Interval: 2 * time.Hour}, "Interval"},
		{"negative max pending", persist.WriterConfig{MaxPending: -1}, "MaxPending"},
	} {
		_, err := persist.NewWriter(db, tc.cfg)
		if !errors.Is(err, persist.ErrConfig) || !contains(err, tc.want) {
			t.Errorf("%s: %v, want ErrConfig naming %s", tc.name, err, tc.want)
		}
	}
}

// A key's reservations (an Entry of their own, with a zero state) are not
// written: they would overwrite the key's state on disk.
func TestWriterSkipsReservations(t *testing.T) {
	db, err := persist.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := newWriter(t, db, persist.WriterConfig{})
	es := entries()
	resv := store.Entry{Key: es[0].Key, Algorithm: es[0].Algorithm,
		Reservations: []bucket.Reservation{{ID: 1, Tag: 1, Estimate: 5, Expires: now + int64(time.Minute)}}}
	withResv := es[0]
	withResv.Reservations = resv.Reservations // a state carrying its key's reservations: written without them
	w.Add([]store.Entry{withResv, resv})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got, st := load(t, db, now)
	if st.Loaded != 1 || got[0].Token != es[0].Token {
		t.Fatalf("loaded %+v (%+v), want key %d's state as written", got, st, es[0].Key)
	}
}
