package store

import (
	"fmt"
	"unsafe"
)

// Kind says whether the states of a key may be evicted while they are live,
// when the store is full (see the package doc's "Eviction").
type Kind uint8

// Kinds of keys.
const (
	// Pinned keys are never evicted while live: the keys of named
	// policies, and every key of a store used through Take, TakeUpTo and
	// Acquire. The zero Kind.
	Pinned Kind = iota
	// Evictable keys may be evicted, least recently used first, to admit
	// a new key when the store is at Config.MaxBytes: the keys of inline
	// limits, which a client creates at will.
	Evictable
)

// String returns "pinned" or "evictable".
func (k Kind) String() string {
	switch k {
	case Pinned:
		return "pinned"
	case Evictable:
		return "evictable"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Eviction bookkeeping. With Config.MaxBytes set, each shard has a second
// map, recent, from each evictable key to the coarse instant of its last
// use (a uint32 of now>>useShift, about a second; 0 never occurs). Pinned
// keys are not in it, so they cost nothing more; an evictable key costs
// one more map slot (recentEntryBytes, counted in Stats.Bytes). A store
// without a cap evicts nothing and keeps no such map.
//
// To admit a new key over the cap, reserve first sweeps the shard of
// expired states, then evicts the least recently used of evictSample
// evictable keys of the shard (Redis-style sampling: Go's map iteration
// starts at a random slot), up to maxEvictions times. It never looks at
// other shards: no operation holds two shard locks.

// recentEntryBytes: an 8-byte key and a 4-byte use instant, in a 16-byte
// slot like the token map's.
const recentEntryBytes = tokenEntryBytes

// useShift makes a state's last use coarse: now>>30 counts units of about
// 1.07 s, which fit a uint32 until the year 2106.
const useShift = 30

// evictSample is how many evictable keys an eviction compares; Redis's
// maxmemory-samples default.
const evictSample = 5

// maxEvictions bounds the evictions one new key may cause (a large sliding
// log may need several small states to go).
const maxEvictions = 8

// useOf returns the coarse instant of a use at now, never 0.
func useOf(now int64) uint32 {
	return max(uint32(now>>useShift), 1)
}

// recentOf returns the map of the last uses of key's shard, or nil when the
// store keeps none. The caller holds the shard's lock.
func (s *Store) recentOf(key uint64) *map[uint64]uint32 {
	if s.recent == nil {
		return nil
	}
	return &s.recent[s.shardIndex(key)]
}

// touch records a use at now of key, which has a state, if it is
// evictable; a pinned key is left alone. A state that is evictable but not
// tracked yet (imported from another node, which does not send the kind)
// becomes tracked: its slot is added to Stats.Bytes. The caller holds the
// shard's lock.
func (s *Store) touch(key uint64, now int64, kind Kind) {
	if kind != Evictable || s.recent == nil {
		return
	}
	m := &s.recent[s.shardIndex(key)]
	if *m == nil {
		*m = make(map[uint64]uint32)
	}
	n := len(*m)
	(*m)[key] = useOf(now)
	if len(*m) > n {
		s.bytes.Add(recentEntryBytes)
	}
}

// untrack forgets the last use of key, whose states are gone. The caller
// holds the shard's lock.
func (s *Store) untrack(key uint64) {
	if s.recent == nil {
		return
	}
	m := s.recent[s.shardIndex(key)]
	if len(m) == 0 {
		return
	}
	if _, ok := m[key]; ok {
		delete(m, key)
		s.bytes.Add(-recentEntryBytes)
	}
}

// drop accounts for the removal of key's state of size bytes: forget, and
// untrack once the key has no state left.
func (s *Store) drop(sh *shard, key uint64, size int64) {
	s.forget(size)
	if s.recent != nil && !hasAny(sh, key) {
		s.untrack(key)
	}
}

// hasAny reports whether key has a state in sh (live or not), of any
// algorithm. The caller holds sh's lock.
func hasAny(sh *shard, key uint64) bool {
	if _, ok := sh.tokens[key]; ok {
		return true
	}
	if _, ok := sh.fixed[key]; ok {
		return true
	}
	if _, ok := sh.sliding[key]; ok {
		return true
	}
	if _, ok := sh.hits[key]; ok {
		return true
	}
	if _, ok := sh.logs[key]; ok {
		return true
	}
	_, ok := sh.leases[key]
	return ok
}

// reserve accounts for a new entry of size bytes of key in sh, whose lock
// the caller holds; kind is the new key's. When the store is at its cap it
// first sweeps sh (if anything in it may have expired), then evicts the
// least recently used evictable keys of sh, then refuses with ErrFull.
// The cap is soft under concurrency: shards insert in parallel, so Bytes
// may overshoot MaxBytes by a few entries.
func (s *Store) reserve(sh *shard, key uint64, now, size int64, kind Kind) error {
	if s.maxBytes > 0 {
		need := size
		if kind == Evictable {
			need += recentEntryBytes // touch adds it after the insert
		}
		if s.bytes.Load()+need > s.maxBytes {
			if now >= sh.sweepAt {
				s.evictedExpired.Add(uint64(s.sweepLocked(sh, now)))
			}
			for i := 0; s.bytes.Load()+need > s.maxBytes; i++ {
				if i == maxEvictions || !s.evictOne(sh, key) {
					b := s.bytes.Load()
					s.refused.Add(1)
					return fmt.Errorf("%w: new key of ~%d bytes refused, estimated %d of MaxBytes %d in use, no evictable key in its shard", ErrFull, need, b, s.maxBytes)
				}
			}
		}
	}
	s.bytes.Add(size)
	s.keys.Add(1)
	return nil
}

// evictOne evicts the least recently used of up to evictSample evictable
// keys of sh (the shard of key) and reports whether there was one. The
// caller holds sh's lock.
func (s *Store) evictOne(sh *shard, key uint64) bool {
	m := s.recentOf(key)
	if m == nil || len(*m) == 0 {
		return false
	}
	var victim uint64
	oldest, n := uint32(0), 0
	for k, used := range *m {
		if n == 0 || used < oldest {
			victim, oldest = k, used
		}
		if n++; n == evictSample {
			break
		}
	}
	removed, freed := deleteKey(sh, victim)
	delete(*m, victim)
	s.keys.Add(-removed)
	s.bytes.Add(-freed - recentEntryBytes)
	s.evictedLRU.Add(uint64(removed))
	return true
}

// recentAt returns the map of the last uses of sh's evictable keys, or nil
// when the store keeps none. The caller holds sh's lock.
func (s *Store) recentAt(sh *shard) *map[uint64]uint32 {
	if s.recent == nil {
		return nil
	}
	i := (uintptr(unsafe.Pointer(sh)) - uintptr(unsafe.Pointer(&s.shards[0]))) / uintptr(shardSize)
	return &s.recent[i]
}
