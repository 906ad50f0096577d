// Package persist keeps a node's states on disk (--data-dir), so that a
// restart, even of every node at once, does not reset the counts.
//
// The engine is go.etcd.io/bbolt: one file (DIR/states.db), one small
// dependency, a B+tree read through mmap, so that loading a million states
// on start is a sequential scan, and an exclusive flock taken on Open, so
// that two processes never share a directory. A rate limiter writes a few
// thousand states per interval at most, overwriting them in place; bbolt's
// copy-on-write pages cost more per write than an LSM engine would
// (cockroachdb/pebble), but the writes are off the check path, batched
// per sync interval, and pebble's dozens of dependencies were not worth it.
//
// What is written: the states the store logged as changed (the same log
// replication drains: limiter.Config.OnChanged), handed to a Writer each
// replication round. The Writer keeps each key's latest state in memory
// and writes them all every sync interval (--data-sync-interval, 1 s by
// default) from its own goroutine, in one transaction. The check path
// never does I/O nor waits for a lock the writer holds while it writes;
// a pending set that reaches its bound is written early, and while that
// write lasts the replication round waits (WriterConfig.MaxPending).
//
// Durability (the fsync policy): each write's transaction is synced
// (fsync) before the next one starts. A process crash (kill -9, OOM kill)
// loses only what was not yet written: at most the last sync interval
// (plus the replication round that hands changes over, and a write under
// way). A synced commit is also what makes bbolt safe across a power loss
// or kernel crash; unsynced, bbolt may be left corrupt, which would lose
// every count rather than one interval. The cost is bbolt's: each write
// copies every page that holds a changed key, so fewer, larger writes
// cost less per state.
//
// Expired states are deleted on load and by Sweep (the node runs it on its
// sweep interval); a state the store dropped early (refilled, handed off)
// stays on disk until it expires, and is then no fuller than the truth.
package persist

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/sluice-rl/sluice/store"
)

// Sentinel errors; errors returned by this package wrap one of them.
var (
	// ErrDataDir is returned by Open for a directory it cannot use: not a
	// directory, not writable, or held by another process.
	ErrDataDir = errors.New("persist: data dir")
	// ErrFormat is returned for data of another format version, or a
	// record that does not decode.
	ErrFormat = errors.New("persist: format")
	// ErrConfig is returned by NewWriter for a setting out of range.
	ErrConfig = errors.New("persist: config")
)

// FileName is the database file in the data directory.
const FileName = "states.db"

// lockTimeout is how long Open waits for another process's lock.
const lockTimeout = 500 * time.Millisecond

var (
	statesBucket = []byte("states")
	metaBucket   = []byte("meta")
	versionKey   = []byte("format")
)

// DB is the states of one node on disk. Its methods may be called from
// several goroutines (bbolt serializes writers).
type DB struct {
	db *bolt.DB
}

// Open opens (creating it if need be) the database in dir, locking it
// against other processes.
func Open(dir string) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: --data-dir: empty", ErrDataDir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: --data-dir %q: %w", ErrDataDir, dir, err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout, NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
		// Address space only: no remapping (under bbolt's lock) as the file grows to it.
		InitialMmapSize: 1 << 30})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: --data-dir %q: in use by another process", ErrDataDir, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: --data-dir %q: %w", ErrDataDir, dir, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		switch v := meta.Get(versionKey); {
		case v == nil:
			if err := meta.Put(versionKey, []byte{formatVersion}); err != nil {
				return err
			}
		case !bytes.Equal(v, []byte{formatVersion}):
			return fmt.Errorf("%w: --data-dir %q: format version %v, this build reads %d", ErrFormat, dir, v, formatVersion)
		}
		_, err = tx.CreateBucketIfNotExists(statesBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		if !errors.Is(err, ErrFormat) {
			err = fmt.Errorf("%w: --data-dir %q: %w", ErrDataDir, dir, err)
		}
		return nil, err
	}
	return &DB{db: db}, nil
}

// Close closes the database and releases its lock.
func (d *DB) Close() error { return d.db.Close() }

// Write stores entries, each in place of its key and algorithm's previous
// state, in one synced transaction. A state expired at now is deleted
// instead.
func (d *DB) Write(entries []store.Entry, now int64) error {
	p := newPending(len(entries))
	for _, e := range entries {
		p.put(e)
	}
	return d.writeRecords(p, now)
}

// writeRecords writes the records of p, in key order.
func (d *DB) writeRecords(p *pending, now int64) error {
	recs := p.records()
	if len(recs) == 0 {
		return nil
	}
	// bbolt keeps the keys' slices until the commit: they are cut from
	// one buffer (kept by p for its next write) rather than allocated each.
	if cap(p.keys) < len(recs)*9 {
		p.keys = make([]byte, 0, len(recs)*9)
	}
	keys := p.keys[:0]
	return d.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(statesBucket)
		for _, r := range recs {
			n := len(keys)
			keys = append(append(keys, r[2:10]...), r[1])
			k := keys[n:len(keys):len(keys)]
			if exp, err := recordExpires(r); err != nil || exp <= now {
				if err := b.Delete(k); err != nil {
					return err
				}
				continue
			}
			if err := b.Put(k, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// LoadStats counts what Load found.
type LoadStats struct {
	// Loaded is the number of live states passed on; Expired, those
	// deleted as expired; Invalid, the records that did not decode
	// (deleted).
	Loaded, Expired, Invalid int
}

// Load calls fn with every live state on disk (ExpiresAt() > now), then
// deletes the expired and undecodable records.
func (d *DB) Load(now int64, fn func(store.Entry)) (LoadStats, error) {
	var st LoadStats
	var drop [][]byte
	err := d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(statesBucket).ForEach(func(k, v []byte) error {
			e, err := DecodeRecord(v)
			switch {
			case err != nil:
				st.Invalid++
				drop = append(drop, bytes.Clone(k))
			case e.ExpiresAt() <= now:
				st.Expired++
				drop = append(drop, bytes.Clone(k))
			default:
				st.Loaded++
				fn(e)
			}
			return nil
		})
	})
	if err != nil {
		return st, fmt.Errorf("persist: load: %w", err)
	}
	return st, d.delete(drop)
}

// Sweep deletes the states expired at now and returns how many.
func (d *DB) Sweep(now int64) (int, error) {
	var drop [][]byte
	err := d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(statesBucket).ForEach(func(k, v []byte) error {
			if exp, err := recordExpires(v); err != nil || exp <= now {
				drop = append(drop, bytes.Clone(k))
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("persist: sweep: %w", err)
	}
	return len(drop), d.delete(drop)
}

// deleteBatch is how many records one delete transaction removes.
const deleteBatch = 10000

// delete removes the records of keys, in transactions of deleteBatch.
func (d *DB) delete(keys [][]byte) error {
	for len(keys) > 0 {
		n := min(len(keys), deleteBatch)
		err := d.db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket(statesBucket)
			for _, k := range keys[:n] {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("persist: delete: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}

// Len returns the number of records on disk.
func (d *DB) Len() (int, error) {
	n := 0
	err := d.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(statesBucket).Stats().KeyN
		return nil
	})
	return n, err
}
