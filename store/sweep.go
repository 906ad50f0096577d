package store

import (
	"maps"
	"math"

	"github.com/sluice-rl/sluice/bucket"
)

// Sweep drops every state that has expired at now (ExpiresAt() <= now, which
// by package bucket's contract equals the zero state, so nothing is lost)
// and returns how many it dropped. It locks one shard at a time and skips
// shards in which nothing can have expired yet, so calling it often is
// cheap. Live states are never dropped.
func (s *Store) Sweep(now int64) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if now >= sh.sweepAt {
			n += s.sweepLocked(sh, now)
		}
		sh.mu.Unlock()
	}
	return n
}

// sweepLocked drops the states of sh (whose lock the caller holds) that have
// expired at now, recomputes sh.sweepAt and returns how many it dropped.
func (s *Store) sweepLocked(sh *shard, now int64) int {
	var sw sweeper
	sw.now, sw.next = now, math.MaxInt64
	meta := s.metaAt(sh)
	if meta != nil {
		sw.meta, sw.metaBefore, sw.clients = *meta, len(*meta), &s.clients
	}
	sh.tokens = sweepMap(&sw, sh.tokens,
		func(v bucket.TokenState) int64 { return v.ExpiresAt() },
		func(bucket.TokenState) int64 { return tokenEntryBytes })
	sh.fixed = sweepMap(&sw, sh.fixed, bucket.WindowState.ExpiresAt, windowBytes)
	sh.sliding = sweepMap(&sw, sh.sliding, bucket.WindowState.ExpiresAt, windowBytes)
	sh.hits = sweepMap(&sw, sh.hits, bucket.WindowState.ExpiresAt, windowBytes)
	sh.logs = sweepMap(&sw, sh.logs, logState.expiresAt,
		func(v logState) int64 { return logBytes(v.entries) })
	sh.leases = sweepMap(&sw, sh.leases, bucket.LeaseState.ExpiresAt,
		func(v bucket.LeaseState) int64 { return leaseBytes(v.Leases) })
	sh.sweepAt = s.sweepResv(s.indexOf(sh), now, sw.next)
	if meta != nil {
		*meta = shrunk(sw.meta, sw.metaBefore)
	}
	if sw.removed > 0 {
		s.keys.Add(-sw.removed)
		s.bytes.Add(-sw.freed)
	}
	return int(sw.removed)
}

// windowBytes is the estimated memory of a stored window state.
func windowBytes(bucket.WindowState) int64 { return windowEntryBytes }

// sweeper accumulates the outcome of sweeping one shard's maps.
type sweeper struct {
	now     int64 // states with ExpiresAt <= now are dropped
	next    int64 // the earliest ExpiresAt among the survivors
	removed int64 // states dropped
	freed   int64 // their estimated bytes
	// meta is the shard's map of evictable and clients' keys (nil if
	// none): a dropped key leaves it too, and its client's count.
	// metaBefore is its length before the sweep.
	meta       map[uint64]keyMeta
	metaBefore int
	clients    *clientKeys
}

// rebuildMin is the map length from which a sweep that leaves less than a
// quarter of the entries rebuilds the map: Go maps never shrink, so a shard
// whose traffic spiked would otherwise keep the memory of its peak.
const rebuildMin = 1024

// sweepMap drops the expired entries of m and returns the map to keep: nil
// when it became empty (freeing it), a right-sized copy when it shrank a
// lot, m otherwise.
func sweepMap[V any](sw *sweeper, m map[uint64]V, expires func(V) int64, size func(V) int64) map[uint64]V {
	before := len(m)
	if before == 0 {
		return nil
	}
	for k, v := range m {
		if exp := expires(v); exp <= sw.now {
			delete(m, k)
			sw.removed++
			sw.freed += size(v)
			if len(sw.meta) > 0 {
				if km, ok := sw.meta[k]; ok {
					delete(sw.meta, k)
					sw.freed += metaEntryBytes
					sw.clients.release(km.client)
				}
			}
		} else if exp < sw.next {
			sw.next = exp
		}
	}
	return shrunk(m, before)
}

// shrunk returns the map to keep of m, which had before entries: nil when
// it became empty (freeing it), a right-sized copy when it shrank a lot, m
// otherwise.
func shrunk[V any](m map[uint64]V, before int) map[uint64]V {
	switch after := len(m); {
	case after == 0:
		return nil
	case before >= rebuildMin && after < before/4:
		return maps.Clone(m)
	}
	return m
}

// DeleteIf removes every state (all algorithms) whose key satisfies pred,
// live or not, and returns how many it removed; e.g. after the keys were
// handed off to another node with Export. It locks one shard at a time and
// calls pred with that lock held: pred must not call the Store.
func (s *Store) DeleteIf(pred func(key uint64) bool) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		var removed, freed int64
		del := func(key uint64, size int64) bool {
			if pred(key) {
				removed++
				freed += size
				return true
			}
			return false
		}
		maps.DeleteFunc(sh.tokens, func(k uint64, _ bucket.TokenState) bool { return del(k, tokenEntryBytes) })
		maps.DeleteFunc(sh.fixed, func(k uint64, _ bucket.WindowState) bool { return del(k, windowEntryBytes) })
		maps.DeleteFunc(sh.sliding, func(k uint64, _ bucket.WindowState) bool { return del(k, windowEntryBytes) })
		maps.DeleteFunc(sh.hits, func(k uint64, _ bucket.WindowState) bool { return del(k, windowEntryBytes) })
		maps.DeleteFunc(sh.logs, func(k uint64, v logState) bool { return del(k, logBytes(v.entries)) })
		maps.DeleteFunc(sh.leases, func(k uint64, v bucket.LeaseState) bool { return del(k, leaseBytes(v.Leases)) })
		if meta := s.metaAt(sh); meta != nil && len(*meta) > 0 {
			maps.DeleteFunc(*meta, func(k uint64, km keyMeta) bool {
				if pred(k) {
					freed += metaEntryBytes
					s.clients.release(km.client)
					return true
				}
				return false
			})
			*meta = nilIfEmpty(*meta)
		}
		s.bytes.Add(-freed)
		if removed > 0 {
			s.keys.Add(-removed)
			n += int(removed)
			// Free maps that became empty; sweepAt stays a valid
			// lower bound.
			sh.tokens = nilIfEmpty(sh.tokens)
			sh.fixed = nilIfEmpty(sh.fixed)
			sh.sliding = nilIfEmpty(sh.sliding)
			sh.hits = nilIfEmpty(sh.hits)
			sh.logs = nilIfEmpty(sh.logs)
			sh.leases = nilIfEmpty(sh.leases)
		}
		sh.mu.Unlock()
	}
	return n
}

// nilIfEmpty returns nil for an empty map, so that its memory is freed.
func nilIfEmpty[V any](m map[uint64]V) map[uint64]V {
	if len(m) == 0 {
		return nil
	}
	return m
}
