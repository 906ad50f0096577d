package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/persist"
	"github.com/sluice-rl/sluice/store"
)

// TestWriterMergesBatches shows that batches merge (a key's latest
// state wins) and that Flush writes what Run left queued.
func TestWriterMergesBatches(t *testing.T) {
	db, err := persist.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := persist.NewWriter(db, func() time.Time { return time.Unix(0, now) }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx, time.Hour); close(done) }()
	es := entries()
	w.Add(es[:2])
	late := es[0]
	late.Token.TAT += 1e9
	w.Add([]store.Entry{late})
	cancel()
	<-done
	if err := w.Flush(); err != nil { // the graceful stop's last write
		t.Fatal(err)
	}
	got, st := load(t, db, now)
	if st.Loaded != 2 || got[0].Token != late.Token {
		t.Fatalf("after stop: %+v (%+v), want 2 states, key 1 at its later state", got, st)
	}
	if written, failed := w.Stats(); written < 2 || failed != 0 {
		t.Fatalf("stats: %d written, %d failed", written, failed)
	}
}

// After Abandon (a crash), nothing more reaches the disk.
func TestWriterAbandon(t *testing.T) {
	db, err := persist.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := persist.NewWriter(db, func() time.Time { return time.Unix(0, now) }, nil)
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

// A key's reservations (an Entry of their own, with a zero state) are not
// written: they would overwrite the key's state on disk.
func TestWriterSkipsReservations(t *testing.T) {
	db, err := persist.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := persist.NewWriter(db, func() time.Time { return time.Unix(0, now) }, nil)
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
