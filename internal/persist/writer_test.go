package persist_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/persist"
	"github.com/sluice-rl/sluice/store"
)

// TestWriterRunFlushesOnStop shows that batches merge (a key's latest
// state wins) and that Run writes what is queued when its context ends.
func TestWriterRunFlushesOnStop(t *testing.T) {
	db, err := persist.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := persist.NewWriter(db, func() time.Time { return time.Unix(0, now) }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	es := entries()
	w.Add(es[:2])
	late := es[0]
	late.Token.TAT += 1e9
	w.Add([]store.Entry{late})
	cancel()
	<-done
	got, st := load(t, db, now)
	if st.Loaded != 2 || got[0].Token != late.Token {
		t.Fatalf("after stop: %+v (%+v), want 2 states, key 1 at its later state", got, st)
	}
	if written, failed := w.Stats(); written < 2 || failed != 0 {
		t.Fatalf("stats: %d written, %d failed", written, failed)
	}
}
