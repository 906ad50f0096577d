package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/internal/persist"
	"github.com/sluice-rl/sluice/store"
)

// Persistence (Config.DataDir, --data-dir): the node keeps the states it
// changes in DIR (package internal/persist) and loads them when it
// starts, before it serves.
//
//   - Each round of replicateLoop (every ReplicationInterval, which runs
//     with DataDir even when Replicas is 0) hands the states changed since
//     the last round to a persist.Writer (limiter.Config.OnChanged), which
//     keeps each key's latest state in memory; its goroutine writes them
//     every DataSyncInterval in one synced transaction. No check waits for
//     the disk, nor for a lock the writer holds while it writes.
//   - A graceful stop runs a last round and writes it after the handoff;
//     a kill -9 loses what the writer had not written: at most the last
//     DataSyncInterval (and a write under way).
//   - On start every live state on disk is imported into the store.
//     States of keys the node does not own once it has joined are handed
//     to their owners by the handoff that follows every ring change
//     (limiter.HandOff pushes every state the node holds and does not
//     own), so they do not need a path of their own. Import merges
//     conservatively, so a state kept on disk after it was handed off
//     earlier can only count more than the truth, and only until it
//     expires.

// sweepDiskEvery is how often expired states are deleted from disk: a
// full scan of the file, so much rarer than the store's sweep.
const sweepDiskEvery = 5 * time.Minute

// disk is a node's data directory; its zero value is off.
type disk struct {
	db           *persist.DB
	w            *persist.Writer
	writeSeconds prometheus.Histogram
	close        sync.Once
}

// openDisk opens cfg.DataDir, if set.
func (n *Node) openDisk() error {
	if n.cfg.DataDir == "" {
		return nil
	}
	db, err := persist.Open(n.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("node: DataDir: %w", err)
	}
	w, err := persist.NewWriter(db, persist.WriterConfig{Interval: n.cfg.DataSyncInterval, Clock: n.cfg.Clock, Log: n.log,
		OnWrite: func(_ int, took time.Duration, err error) {
			if err == nil {
				n.disk.writeSeconds.Observe(took.Seconds())
			}
		}})
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("node: DataSyncInterval: %w", err)
	}
	n.disk.db, n.disk.w = db, w
	n.disk.writeSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_persist_write_seconds",
		Help:    "Time of each synced write of the changed states to the data directory (--data-dir).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})
	return nil
}

// diskMetrics are the data directory writer's metrics, none without one.
func (n *Node) diskMetrics() []prometheus.Collector {
	w := n.disk.w
	if w == nil {
		return nil
	}
	return []prometheus.Collector{
		n.disk.writeSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_persist_pending_states",
			Help: "Changed states waiting in memory for the next write to the data directory."},
			func() float64 { return float64(w.Stats().Pending) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_persist_last_write_age_seconds",
			Help: "Seconds since the latest instant whose changes are all on disk, synced: what a kill -9 now would lose at most. About --data-sync-interval while the writer keeps up."},
			func() float64 { return time.Since(w.Stats().SyncedAt).Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_persist_states_written_total",
			Help: "States written to the data directory."},
			func() float64 { return float64(w.Stats().Written) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_persist_states_failed_total",
			Help: "States whose write to the data directory failed (retried with the next write)."},
			func() float64 { return float64(w.Stats().Failed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_persist_full_waits_total",
			Help: "Replication rounds that found the writer's pending set full and waited for a write: the disk falling behind."},
			func() float64 { return float64(w.Stats().FullWaits) }),
	}
}

// onChanged is the limiter's OnChanged with a data directory, else nil.
func (n *Node) onChanged() func([]store.Entry) {
	if n.disk.w == nil {
		return nil
	}
	return n.disk.w.Add
}

// loadDisk imports the states on disk into the limiter's store.
func (n *Node) loadDisk() error {
	if n.disk.db == nil {
		return nil
	}
	st := n.limiter.Store()
	now := n.now().UnixNano()
	refused, start := 0, time.Now()
	var firstErr error
	stats, err := n.disk.db.Load(now, func(e store.Entry) {
		if err := st.Import(e, now); err != nil {
			refused++
			if firstErr == nil {
				firstErr = err
			}
		}
	})
	if err != nil {
		return fmt.Errorf("node: DataDir: %w", err)
	}
	n.log.Info("loaded states from the data directory", "dir", n.cfg.DataDir, "states", stats.Loaded,
		"expired", stats.Expired, "undecodable", stats.Invalid, "refused", refused, "took", time.Since(start))
	if refused > 0 {
		n.log.Warn("states on disk refused by the store", "refused", refused, "first", firstErr)
	}
	return nil
}

// diskLoop writes the Writer's batches until ctx is done.
func (n *Node) diskLoop(ctx context.Context) {
	n.disk.w.Run(ctx, sweepDiskEvery)
}

// flushDisk writes what the store changed since the last round (a
// graceful stop's last round; replicateLoop has ended by then).
func (n *Node) flushDisk() error {
	if n.disk.w == nil {
		return nil
	}
	n.replicateRound(context.Background())
	if err := n.disk.w.Flush(); err != nil {
		return fmt.Errorf("node: DataDir: last write: %w", err)
	}
	return nil
}

// closeDisk closes the data directory (once), writing nothing more.
func (n *Node) closeDisk() error {
	var err error
	n.disk.close.Do(func() {
		if n.disk.db == nil {
			return
		}
		n.disk.w.Abandon()
		err = n.disk.db.Close()
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("node: DataDir: close: %w", err)
	}
	return nil
}
