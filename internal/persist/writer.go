package persist

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/store"
)

// Writer writes the batches handed to it (Add) to a DB from its own
// goroutine (Run), so that the caller never waits for the disk. Batches
// that arrive while a write is under way merge: a key's latest state wins.
type Writer struct {
	db    *DB
	clock func() time.Time
	log   *slog.Logger

	flushMu sync.Mutex // one Flush at a time; Abandon waits for it

	mu        sync.Mutex
	pending   map[recordID]store.Entry
	abandoned bool
	wake      chan struct{}

	written, failed uint64 // under mu
}

// recordID is a record's identity: a key may hold a state per algorithm.
type recordID struct {
	key  uint64
	algo uint8
}

// NewWriter returns a Writer to db. clock and log may be nil (time.Now,
// slog.Default's discard).
func NewWriter(db *DB, clock func() time.Time, log *slog.Logger) *Writer {
	if clock == nil {
		clock = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Writer{db: db, clock: clock, log: log, pending: map[recordID]store.Entry{}, wake: make(chan struct{}, 1)}
}

// Add queues entries (which the Writer now owns) for the next write. It
// never blocks on the disk.
func (w *Writer) Add(entries []store.Entry) {
	if len(entries) == 0 {
		return
	}
	w.mu.Lock()
	if w.abandoned {
		w.mu.Unlock()
		return
	}
	for _, e := range entries {
		if len(e.Reservations) > 0 {
			// A key's reservations are not kept on disk; an Entry of
			// them alone (a zero state, which expires at 0) would
			// overwrite the key's state under the same record key.
			if e.Reservations = nil; e.ExpiresAt() == 0 {
				continue
			}
		}
		w.pending[recordID{e.Key, uint8(e.Algorithm)}] = e
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Flush writes what is queued, in one synced transaction.
func (w *Writer) Flush() error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	p := w.pending
	if len(p) == 0 {
		w.mu.Unlock()
		return nil
	}
	w.pending = make(map[recordID]store.Entry, len(p))
	w.mu.Unlock()
	batch := make([]store.Entry, 0, len(p))
	for _, e := range p {
		batch = append(batch, e)
	}
	err := w.db.Write(batch, w.clock().UnixNano())
	w.mu.Lock()
	if err != nil {
		w.failed += uint64(len(batch))
		// Put back what no later batch replaced: written next time.
		for _, e := range batch {
			id := recordID{e.Key, uint8(e.Algorithm)}
			if _, newer := w.pending[id]; !newer {
				w.pending[id] = e
			}
		}
	} else {
		w.written += uint64(len(batch))
	}
	w.mu.Unlock()
	return err
}

// Stats returns the states written and the states whose write failed
// (retried with the next batch).
func (w *Writer) Stats() (written, failed uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.written, w.failed
}

// Abandon drops what is queued and makes Add and Flush do nothing from
// now on, as a kill -9 would (tests model a crash with it). It waits for a
// write under way to end.
func (w *Writer) Abandon() {
	w.mu.Lock()
	w.abandoned, w.pending = true, map[recordID]store.Entry{}
	w.mu.Unlock()
	w.flushMu.Lock()
	//lint:ignore SA2001 the empty section waits for a Flush under way
	w.flushMu.Unlock()
}

// Run writes each batch as it is added, and deletes the expired states
// every sweepEvery (none if 0), until ctx is done. It does not write what
// is left then: a graceful stop calls Flush after its last batch.
func (w *Writer) Run(ctx context.Context, sweepEvery time.Duration) {
	var sweep <-chan time.Time
	if sweepEvery > 0 {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		sweep = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			if err := w.Flush(); err != nil {
				w.log.Warn("persist: write failed; retried with the next batch", "err", err)
			}
		case <-sweep:
			w.flushMu.Lock()
			if !w.isAbandoned() {
				if n, err := w.db.Sweep(w.clock().UnixNano()); err != nil {
					w.log.Warn("persist: sweep failed", "err", err)
				} else if n > 0 {
					w.log.Debug("persist: expired states deleted", "states", n)
				}
			}
			w.flushMu.Unlock()
		}
	}
}

func (w *Writer) isAbandoned() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.abandoned
}
