package persist

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/store"
)

// DefaultSyncInterval is how often a Writer writes what changed, unless
// WriterConfig.Interval says otherwise (--data-sync-interval).
const DefaultSyncInterval = time.Second

// MaxSyncInterval bounds WriterConfig.Interval: what a kill -9 may lose
// grows with it.
const MaxSyncInterval = time.Hour

// DefaultMaxPending is how many changed states a Writer holds before it
// writes early (WriterConfig.MaxPending): some 15 MB of token-bucket
// states (a record and a map slot each).
const DefaultMaxPending = 1 << 18

// WriterConfig configures a Writer. The zero value of each field is its
// default.
type WriterConfig struct {
	// Interval is how often the states added since the last write are
	// written, in one synced transaction: DefaultSyncInterval if 0, at most
	// MaxSyncInterval.
	Interval time.Duration
	// MaxPending is how many distinct states (key and algorithm) may wait
	// for the next write, or 128 bytes of records each: DefaultMaxPending
	// if 0. A set that reaches it is
	// written at once, without waiting for the interval; while that write
	// is under way, Add waits (the replication round that calls it, never
	// a check). So at most about 2 × MaxPending states are held: the set
	// being written and the one filling.
	MaxPending int
	// Clock gives the time that decides which states are expired when
	// written; nil means time.Now.
	Clock func() time.Time
	// Log receives write failures; nil discards them.
	Log *slog.Logger
	// OnWrite, if set, is called after each write transaction with the
	// states it wrote, how long it took and its error (from the writer's
	// goroutine): the node's write-time histogram.
	OnWrite func(states int, took time.Duration, err error)
}

// Writer collects the states handed to it (Add) in memory, a key's latest
// state replacing the one before, and writes them to a DB from its own
// goroutine (Run) every Interval, in one synced transaction, so that the
// caller never waits for the disk and a key changed many times within an
// interval is written once.
type Writer struct {
	db  *DB
	cfg WriterConfig

	flushMu sync.Mutex // one Flush at a time; Abandon waits for it

	mu        sync.Mutex
	room      *sync.Cond // signalled when a write takes the pending set
	pending   *pending
	spare     *pending // the set last written, emptied, for the next swap
	abandoned bool
	running   bool // Run is running: Add may wait for it to make room
	failing   bool // the last write failed: Add does not wait, Run retries at the interval
	full      chan struct{}

	// Under mu: the counters of Stats, the latest round handed over
	// (MarkRound), and the round whose states all are on disk.
	written, failed, writes, fullWaits uint64
	markedAt, syncedAt                 time.Time
}

// NewWriter returns a Writer to db. It fails, naming the field, for a
// negative or too long Interval or a negative MaxPending.
func NewWriter(db *DB, cfg WriterConfig) (*Writer, error) {
	switch {
	case cfg.Interval < 0 || cfg.Interval > MaxSyncInterval:
		return nil, fmt.Errorf("%w: Interval: must be from 0 (the default, %s) to %s, got %s", ErrConfig, DefaultSyncInterval, MaxSyncInterval, cfg.Interval)
	case cfg.MaxPending < 0:
		return nil, fmt.Errorf("%w: MaxPending: must be >= 0, got %d", ErrConfig, cfg.MaxPending)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultSyncInterval
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	now := time.Now()
	w := &Writer{db: db, cfg: cfg, pending: newPending(0), full: make(chan struct{}, 1), markedAt: now, syncedAt: now}
	w.room = sync.NewCond(&w.mu)
	return w, nil
}

// Add queues entries (copied: the caller may reuse the slice) for the
// next write. It never waits for the disk, except when MaxPending states
// are queued already while Run writes: then it waits for that write to
// end (its caller is a replication round, never a check). After a failed
// write it does not wait: the set grows (each key once) until a write
// succeeds, rather than holding up replication while the disk is broken.
func (w *Writer) Add(entries []store.Entry) {
	if len(entries) == 0 {
		return
	}
	w.mu.Lock()
	waited := false
	for w.running && !w.abandoned && !w.failing && w.isFull() {
		if !waited {
			waited = true
			w.fullWaits++
		}
		w.signalFull()
		w.room.Wait()
	}
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
		w.pending.put(e)
	}
	if w.isFull() {
		w.signalFull()
	}
	w.mu.Unlock()
}

// isFull reports whether the pending set holds MaxPending states, or
// their records 128 bytes each (sliding logs and leases are longer). Its
// caller holds mu.
func (w *Writer) isFull() bool {
	return w.pending.len() >= w.cfg.MaxPending || w.pending.bytes() >= w.cfg.MaxPending*128
}

// signalFull tells Run to write now. Its caller holds mu.
func (w *Writer) signalFull() {
	select {
	case w.full <- struct{}{}:
	default:
	}
}

// MarkRound says that every state changed before at has been handed to
// Add: once the write that follows ends, nothing older is only in memory
// (Stats.SyncedAt).
func (w *Writer) MarkRound(at time.Time) {
	w.mu.Lock()
	if at.After(w.markedAt) {
		w.markedAt = at
	}
	w.mu.Unlock()
}

// Flush writes what is queued, in one synced transaction.
func (w *Writer) Flush() error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	w.mu.Lock()
	p, marked := w.pending, w.markedAt
	if p.len() == 0 {
		if !w.abandoned && marked.After(w.syncedAt) {
			w.syncedAt = marked // nothing changed: all is on disk
		}
		w.mu.Unlock()
		return nil
	}
	if w.pending = w.spare; w.pending == nil {
		w.pending = newPending(p.len())
	}
	w.spare = nil
	w.room.Broadcast()
	w.mu.Unlock()
	start := time.Now()
	err := w.db.writeRecords(p, w.cfg.Clock().UnixNano())
	took := time.Since(start)
	batch := p.out
	w.mu.Lock()
	w.writes++
	w.failing = err != nil
	if err != nil {
		w.failed += uint64(len(batch))
		if !w.abandoned {
			w.pending.putBack(batch) // copied: written next time, unless replaced
		}
	} else {
		w.written += uint64(len(batch))
		if marked.After(w.syncedAt) {
			w.syncedAt = marked
		}
	}
	n := len(batch)
	p.reset()
	if !w.abandoned {
		w.spare = p
	}
	w.mu.Unlock()
	if w.cfg.OnWrite != nil {
		w.cfg.OnWrite(n, took, err)
	}
	return err
}

// WriterStats is what a Writer has done.
type WriterStats struct {
	// Written is the states written; Failed, those whose write failed
	// (retried with the next write); Writes, the write transactions.
	Written, Failed, Writes uint64
	// Pending is the states waiting for the next write.
	Pending int
	// FullWaits counts the Adds that found MaxPending states queued and
	// waited for a write to take them: the disk falling behind.
	FullWaits uint64
	// SyncedAt is the latest instant before which every change handed
	// over is on disk, synced: a kill -9 loses at most the changes made
	// since (about one Interval when the writer keeps up).
	SyncedAt time.Time
}

// Stats returns what the Writer has done.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriterStats{Written: w.written, Failed: w.failed, Writes: w.writes, Pending: w.pending.len(),
		FullWaits: w.fullWaits, SyncedAt: w.syncedAt}
}

// Abandon drops what is queued and makes Add and Flush do nothing from
// now on, as a kill -9 would (tests model a crash with it). It waits for a
// write under way to end.
func (w *Writer) Abandon() {
	w.mu.Lock()
	w.abandoned, w.pending = true, newPending(0)
	w.room.Broadcast()
	w.mu.Unlock()
	w.flushMu.Lock()
	//lint:ignore SA2001 the empty section waits for a Flush under way
	w.flushMu.Unlock()
}

// Run writes what was added every Interval (at once when MaxPending
// states wait), and deletes the expired states every sweepEvery (none if
// 0), until ctx is done. It does not write what is left then: a graceful
// stop calls Flush after its last round.
func (w *Writer) Run(ctx context.Context, sweepEvery time.Duration) {
	w.mu.Lock()
	w.running = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.room.Broadcast() // an Add waiting for room goes on without
		w.mu.Unlock()
	}()
	var sweep <-chan time.Time
	if sweepEvery > 0 {
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		sweep = t.C
	}
	tick := time.NewTicker(w.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-w.full:
			if w.isFailing() {
				continue // no retry loop on a broken disk: the tick retries
			}
		case <-sweep:
			w.flushMu.Lock()
			if !w.isAbandoned() {
				if n, err := w.db.Sweep(w.cfg.Clock().UnixNano()); err != nil {
					w.cfg.Log.Warn("persist: sweep failed", "err", err)
				} else if n > 0 {
					w.cfg.Log.Debug("persist: expired states deleted", "states", n)
				}
			}
			w.flushMu.Unlock()
			continue
		}
		if err := w.Flush(); err != nil {
			w.cfg.Log.Warn("persist: write failed; retried with the next one", "err", err)
		}
	}
}

func (w *Writer) isFailing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failing
}

func (w *Writer) isAbandoned() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.abandoned
}
