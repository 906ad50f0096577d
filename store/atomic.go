package store

import (
	"fmt"
	"slices"

	"github.com/sluice-rl/sluice/bucket"
)

// AtomicItem is one take of TakeAll.
type AtomicItem struct {
	Key   uint64
	Limit bucket.Limit
	Cost  int64
	As    Use
}

// TakeAll takes every item, or none: it locks the shards of all the items'
// keys (in index order, so that two TakeAll calls never deadlock; every
// other operation holds one shard lock at a time), applies each take in
// order (a key taken twice sees its first take), and when one is denied
// or fails it puts back every state it changed, so that nothing was
// charged (not even the denied hits fixed_window_hits counts). It reports
// whether the takes were kept. out[i] (len(out) >= len(items)) receives
// item i's result: its take's when kept; otherwise the verdict of its
// take (Allowed, RetryAfter) over a read of the state put back (Limit,
// Remaining, ResetAfter). An error of a take (ErrFull, say) is returned
// after the states are put back. Concurrency limits are
// ErrWrongAlgorithm: leases are not taken with checks.
func (s *Store) TakeAll(items []AtomicItem, now int64, out []bucket.Result) (bool, error) {
	shards := make([]uint64, 0, len(items))
	for _, it := range items {
		if it.Limit.Algorithm == bucket.Concurrency {
			return false, fmt.Errorf("%w: TakeAll of a concurrency limit", ErrWrongAlgorithm)
		}
		shards = append(shards, s.shardIndex(it.Key))
	}
	slices.Sort(shards)
	shards = slices.Compact(shards)
	for _, i := range shards {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range shards {
			s.shards[i].mu.Unlock()
		}
	}()
	type stateID struct {
		key uint64
		alg bucket.Algorithm
	}
	saved := make(map[stateID]*Entry, len(items))
	kept := true
	var firstErr error
	for i, it := range items {
		sh := s.shardOf(it.Key)
		id := stateID{it.Key, storedAlgorithm(it.Limit)}
		if _, ok := saved[id]; !ok {
			saved[id] = stateOf(sh, it.Key, id.alg)
		}
		res, err := s.takeLocked(sh, it.Key, it.Limit, now, it.Cost, it.As)
		out[i] = res
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			kept = false
			continue
		}
		kept = kept && res.Allowed
	}
	if kept {
		return true, nil
	}
	for id, old := range saved {
		sh := s.shardOf(id.key)
		s.deleteAlgorithm(sh, id.key, id.alg)
		if old != nil && !old.isZero(now) {
			if err := s.putLocked(sh, *old, now, false); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	for i, it := range items {
		read, err := s.takeLocked(s.shardOf(it.Key), it.Key, it.Limit, now, 0, it.As)
		if err != nil {
			continue
		}
		out[i].Limit, out[i].Remaining, out[i].ResetAfter = read.Limit, read.Remaining, read.ResetAfter
	}
	return false, firstErr
}

// storedAlgorithm is the algorithm whose map holds l's state: a quota's
// is FixedWindow.
func storedAlgorithm(l bucket.Limit) bucket.Algorithm {
	if l.IsQuota() {
		return bucket.FixedWindow
	}
	return l.Algorithm
}

// takeLocked is TakeAs with key's shard sh locked.
func (s *Store) takeLocked(sh *shard, key uint64, l bucket.Limit, now, cost int64, as Use) (bucket.Result, error) {
	switch storedAlgorithm(l) {
	case bucket.TokenBucket:
		return s.takeTokenLocked(sh, key, l, now, cost, as)
	case bucket.FixedWindow:
		return s.takeWindowLocked(sh, &sh.fixed, bucket.TakeFixedWindow, key, l, now, cost, false, as)
	case bucket.SlidingWindow:
		return s.takeWindowLocked(sh, &sh.sliding, bucket.TakeSlidingWindow, key, l, now, cost, false, as)
	case bucket.FixedWindowHits:
		return s.takeWindowLocked(sh, &sh.hits, bucket.TakeFixedWindowHits, key, l, now, cost, true, as)
	case bucket.SlidingLog:
		return s.takeLogLocked(sh, key, l, now, cost, as)
	}
	return bucket.Result{}, fmt.Errorf("%w: %v", bucket.ErrUnknownAlgorithm, l.Algorithm)
}

// stateOf returns a copy of key's stored state of algorithm a in sh
// (whose lock the caller holds), or nil when there is none.
func stateOf(sh *shard, key uint64, a bucket.Algorithm) *Entry {
	e := Entry{Key: key, Algorithm: a}
	var ok bool
	switch a {
	case bucket.TokenBucket:
		e.Token, ok = sh.tokens[key]
	case bucket.FixedWindow:
		e.Window, ok = sh.fixed[key]
	case bucket.SlidingWindow:
		e.Window, ok = sh.sliding[key]
	case bucket.FixedWindowHits:
		e.Window, ok = sh.hits[key]
	case bucket.SlidingLog:
		var v logState
		if v, ok = sh.logs[key]; ok {
			e.Log.Entries, e.Period = slices.Clone(v.entries), v.period
		}
	}
	if !ok {
		return nil
	}
	return &e
}
