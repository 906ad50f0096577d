package store

import "slices"

// Change tracking, for replication: with Config.TrackChanges, every write
// of a state (a take that changes it, a grant, a give-back, an import)
// appends its key to its shard's change log, under the shard lock the write
// holds already, and ExportChanged hands the logged keys' states over and
// empties the logs. A log that reaches its share of Config.MaxChanges stops
// listing keys and marks its shard for a whole export instead, so the logs'
// memory stays bounded however long nobody drains them. A state deleted
// (refilled, swept, moved away) is not exported: a copy of its older state
// elsewhere expires no later than it would have.

// changeLog is the change log of one shard, padded to a cache line so
// that neighbouring shards' logs never share one.
type changeLog struct {
	keys []uint64
	all  bool // the log overflowed: export the whole shard
	_    [64 - 24 - 8]byte
}

// noteWrite records that the state of key in sh (whose lock the caller
// holds) was written and now expires at exp.
func (s *Store) noteWrite(sh *shard, key uint64, exp int64) {
	sh.noteExpiry(exp)
	if s.changes == nil {
		return
	}
	lg := &s.changes[s.shardIndex(key)]
	switch n := len(lg.keys); {
	case lg.all:
	case n > 0 && lg.keys[n-1] == key: // a hot key, written again
	case n >= s.maxChanges:
		lg.all, lg.keys = true, nil
	default:
		lg.keys = append(lg.keys, key)
	}
}

// ExportChanged calls fn with the live states of the keys written since
// the last ExportChanged (each key once, all its algorithms' states) and
// forgets them. fn may stop it early by returning false: the keys of the
// shards not reached yet stay logged, the rest of the current shard's are
// forgotten. Like Export, it holds one shard
// lock at a time and calls fn without any held. It does nothing when the
// store does not track changes.
func (s *Store) ExportChanged(now int64, fn func(Entry) bool) {
	if s.changes == nil {
		return
	}
	var buf []Entry
	var keys []uint64
	for i := range s.shards {
		sh, lg := &s.shards[i], &s.changes[i]
		sh.mu.Lock()
		if !lg.all && len(lg.keys) == 0 {
			sh.mu.Unlock()
			continue
		}
		buf = buf[:0]
		if lg.all {
			buf = exportShard(buf, sh, now, nil)
		} else {
			keys = append(keys[:0], lg.keys...)
			slices.Sort(keys)
			for _, k := range slices.Compact(keys) {
				buf = exportShardKeys(buf, sh, now, k)
			}
		}
		lg.all, lg.keys = false, lg.keys[:0]
		sh.mu.Unlock()
		for _, e := range buf {
			if !fn(e) {
				return
			}
		}
		clear(buf)
	}
}

// MarkAllChanged makes the next ExportChanged hand over every live state,
// as after a change of who must hold the copies. It does nothing when the
// store does not track changes.
func (s *Store) MarkAllChanged() {
	if s.changes == nil {
		return
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.changes[i].all, s.changes[i].keys = true, nil
		sh.mu.Unlock()
	}
}
