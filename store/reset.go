package store

import (
	"fmt"

	"github.com/sluice-rl/sluice/bucket"
)

// Reset sets the state of key under l to remaining units left at now
// (0..l.Capacity()): the state a full key has after a take of
// capacity-remaining units. A remaining of the capacity deletes the state
// (a full key has none). It replaces the key's state of l's algorithm
// under its shard's lock, whatever it was; the key's states of other
// algorithms stay. A concurrency limit can only be reset to full, which
// drops its leases.
//
// With change tracking, a deleted state is logged as a tombstone:
// ExportChanged hands over a zero Entry of the key and algorithm (the
// state ExpiresAt 0), so that a copy elsewhere (an heir's replica:
// Replace deletes on it; a data directory: persist deletes the record)
// follows the reset rather than keep the count it replaced. Errors wrap
// ErrInvalidEntry for a remaining out of range, or ErrFull when a new key
// does not fit.
func (s *Store) Reset(key uint64, l bucket.Limit, now, remaining int64) error {
	capacity := l.Capacity()
	if remaining < 0 || remaining > capacity {
		return fmt.Errorf("%w: %#x: remaining: %d out of [0, %d]", ErrInvalidEntry, key, remaining, capacity)
	}
	used := capacity - remaining
	e := Entry{Key: key, Algorithm: l.Algorithm}
	var err error
	switch l.Algorithm {
	case bucket.TokenBucket:
		if l.Calendar != bucket.NoCalendar {
			// A quota is stored as a fixed window (see TakeAs).
			e.Algorithm = bucket.FixedWindow
			e.Window, _, err = bucket.TakeFixedWindow(bucket.WindowState{}, l, now, used)
		} else {
			e.Token, _, err = bucket.TakeToken(bucket.TokenState{}, l, now, used)
		}
	case bucket.FixedWindow:
		e.Window, _, err = bucket.TakeFixedWindow(bucket.WindowState{}, l, now, used)
	case bucket.SlidingWindow:
		e.Window, _, err = bucket.TakeSlidingWindow(bucket.WindowState{}, l, now, used)
	case bucket.FixedWindowHits:
		e.Window, _, err = bucket.TakeFixedWindowHits(bucket.WindowState{}, l, now, used)
	case bucket.SlidingLog:
		e.Period = int64(l.Period)
		e.Log, _, err = bucket.TakeLog(bucket.LogState{}, l, now, used)
	case bucket.Concurrency:
		if used != 0 {
			return fmt.Errorf("%w: %#x: remaining: a concurrency limit resets only to full (its leases dropped)", ErrInvalidEntry, key)
		}
	default:
		return fmt.Errorf("%w: %v", bucket.ErrUnknownAlgorithm, l.Algorithm)
	}
	if err != nil {
		return err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	deleted := s.deleteAlgorithm(sh, key, e.Algorithm)
	if e.Algorithm == bucket.TokenBucket {
		s.dropDebtLocked(sh, key, now) // the state is set, whatever it owed
	}
	if !e.isZero(now) {
		return s.putLocked(sh, e, now, false)
	}
	if deleted && s.changes != nil {
		s.logChange(key, tombstone(e.Algorithm))
	}
	return nil
}

// deleteAlgorithm removes key's state of algorithm a (as stored: a quota
// is a FixedWindow) from sh, whose lock the caller holds, and reports
// whether there was one.
func (s *Store) deleteAlgorithm(sh *shard, key uint64, a bucket.Algorithm) bool {
	var size int64
	switch a {
	case bucket.TokenBucket:
		if _, ok := sh.tokens[key]; !ok {
			return false
		}
		delete(sh.tokens, key)
		size = tokenEntryBytes
	case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
		m := sh.fixed
		switch a {
		case bucket.SlidingWindow:
			m = sh.sliding
		case bucket.FixedWindowHits:
			m = sh.hits
		}
		if _, ok := m[key]; !ok {
			return false
		}
		delete(m, key)
		size = windowEntryBytes
	case bucket.SlidingLog:
		v, ok := sh.logs[key]
		if !ok {
			return false
		}
		delete(sh.logs, key)
		size = logBytes(v.entries)
	case bucket.Concurrency:
		v, ok := sh.leases[key]
		if !ok {
			return false
		}
		delete(sh.leases, key)
		size = leaseBytes(v.Leases)
	default:
		return false
	}
	s.drop(sh, key, size)
	return true
}

// Tombstones in a change log: a change whose tat is tombstone(a) says
// that key's state of algorithm a was deleted by Reset. They sit just
// above lookUp, far below any real TAT.
func tombstone(a bucket.Algorithm) int64 { return lookUp + 1 + int64(a) }

// tombstoneOf returns the algorithm of a tombstone change's tat, and
// whether it is one.
func tombstoneOf(tat int64) (bucket.Algorithm, bool) {
	if tat <= lookUp || tat > lookUp+1+int64(bucket.LastAlgorithm) {
		return 0, false
	}
	return bucket.Algorithm(tat - lookUp - 1), true
}

// zeroEntry is the tombstone Entry of key's state of algorithm a: a zero
// state (ExpiresAt 0) that passes Validate.
func zeroEntry(key uint64, a bucket.Algorithm) Entry {
	e := Entry{Key: key, Algorithm: a}
	if a == bucket.SlidingLog {
		e.Period = 1
	}
	return e
}

// appendTombstones appends to buf the tombstones of key's algorithms in
// gone (a bit per algorithm) that buf[from:] holds no live state of.
func appendTombstones(buf []Entry, from int, key uint64, gone uint16) []Entry {
	for a := bucket.TokenBucket; a <= bucket.LastAlgorithm; a++ {
		if gone&(1<<a) == 0 {
			continue
		}
		live := false
		for _, e := range buf[from:] {
			live = live || e.Algorithm == a
		}
		if !live {
			buf = append(buf, zeroEntry(key, a))
		}
	}
	return buf
}
