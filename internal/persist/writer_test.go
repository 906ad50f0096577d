package persist_test

import (
	"context"
	"testing"
	"time"

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
