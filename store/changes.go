package store

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"

	"github.com/sluice-rl/sluice/bucket"
)

// Change tracking, for replication: with Config.TrackChanges, every write
// of a state (a take that changes it, a grant, a give-back, an import)
// appends its key to its shard's change log, under the shard lock the write
// holds already, and ExportChanged hands the logged keys' states over and
// empties the logs. A log that reaches its share of Config.MaxChanges stops
// listing keys and marks its shard for a whole export instead, so the logs'
// memory stays bounded however long nobody drains them. A state deleted
// (refilled, swept, moved away) is not exported: a copy of its older state
// elsewhere expires no later than it would have. A state deleted by Reset
// is, as a tombstone (a zero Entry), unless its shard's log overflowed
// meanwhile (the copy then keeps the older count until it expires).

// changeLog is the change log of one shard, padded to a cache line so
// that neighbouring shards' logs never share one. A token bucket's write
// logs its new state (its TAT), so that the export needs no lookup of the
// key again; other writes log the key alone (tat lookUp).
type changeLog struct {
	changes []change
	all     bool        // the log overflowed: export the whole shard
	dirty   atomic.Bool // changes or all: ExportChanged skips clean shards unlocked
	_       [64 - 24 - 8]byte
}

// change is one logged write.
type change struct {
	key uint64
	tat int64 // a token bucket's new state, or lookUp
}

// lookUp marks a change whose state ExportChanged reads from the store.
const lookUp = math.MinInt64

// noteWrite records that the state of key in sh (whose lock the caller
// holds) was written and now expires at exp.
func (s *Store) noteWrite(sh *shard, key uint64, exp int64) {
	sh.noteExpiry(exp)
	if s.changes != nil {
		s.logChange(key, lookUp)
	}
}

// noteToken is noteWrite for a token bucket's new state st.
func (s *Store) noteToken(sh *shard, key uint64, st bucket.TokenState) {
	sh.noteExpiry(st.ExpiresAt())
	if s.changes != nil {
		s.logChange(key, st.TAT)
	}
}

// mergeable reports whether a key's change tat may stand in for its last
// change last: a token state replaces a token state, and a lookup covers
// every write but a Reset's tombstone, which must reach the export to
// delete the copies of the key's other states.
func mergeable(last, tat int64) bool {
	_, lastGone := tombstoneOf(last)
	_, gone := tombstoneOf(tat)
	return !lastGone && !gone
}

// logChange appends a change to key's shard's log (whose lock the caller
// holds).
func (s *Store) logChange(key uint64, tat int64) {
	lg := &s.changes[s.shardIndex(key)]
	switch n := len(lg.changes); {
	case lg.all:
		return
	case n > 0 && lg.changes[n-1].key == key && mergeable(lg.changes[n-1].tat, tat): // a hot key, written again
		if lg.changes[n-1].tat != lookUp { // a lookup reads every state, reservations too
			lg.changes[n-1].tat = tat
		}
	case n >= s.maxChanges:
		lg.all, lg.changes = true, nil
	default:
		lg.changes = append(lg.changes, change{key, tat})
	}
	if !lg.dirty.Load() {
		lg.dirty.Store(true)
	}
}

// ExportChanged calls fn with the live states of the keys written since
// the last ExportChanged (each key once, all its algorithms' states) and
// forgets them. fn may stop it early by returning false: the keys of the
// shards not reached yet stay logged, the rest of the current shard's are
// forgotten. Like Export, it holds one shard lock at a time and calls fn
// without any held. It does nothing when the store does not track changes.
func (s *Store) ExportChanged(now int64, fn func(Entry) bool) {
	if s.changes == nil {
		return
	}
	var buf []Entry
	var cs []change
	for i := range s.shards {
		sh, lg := &s.shards[i], &s.changes[i]
		if !lg.dirty.Load() {
			continue // a write sets dirty under the lock we would take
		}
		sh.mu.Lock()
		buf = buf[:0]
		if lg.all {
			buf = exportShard(buf, sh, now, nil)
			buf = s.exportResvShard(buf, 0, i, now, nil)
		} else {
			// A key's last token change is its token state now; a key
			// with another change is read from the store, every
			// algorithm's state of it.
			cs = append(cs[:0], lg.changes...)
			slices.SortStableFunc(cs, func(a, b change) int { return cmp.Compare(a.key, b.key) })
			look, gone := false, uint16(0)
			for j, c := range cs {
				if a, ok := tombstoneOf(c.tat); ok {
					look, gone = true, gone|1<<a
				}
				look = look || c.tat == lookUp
				switch {
				case j+1 < len(cs) && cs[j+1].key == c.key:
					continue
				case look:
					from := len(buf)
					buf = exportShardKeys(buf, sh, now, c.key)
					buf = appendTombstones(buf, from, c.key, gone)
					buf = s.exportResv(buf, from, c.key, now)
				case c.tat > now:
					buf = append(buf, Entry{Key: c.key, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: c.tat}})
				}
				look, gone = false, 0
			}
		}
		lg.all, lg.changes = false, lg.changes[:0]
		lg.dirty.Store(false)
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
		s.changes[i].all, s.changes[i].changes = true, nil
		s.changes[i].dirty.Store(true)
		sh.mu.Unlock()
	}
}
