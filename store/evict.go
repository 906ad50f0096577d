package store

import (
	"fmt"
	"sync"
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

// Use says how a take uses a key: the key's Kind, and the client it is
// taken for (a 64-bit tag of the client's verified identity; 0 for none).
// A new key of a client counts against Config.MaxKeysPerClient until it is
// gone (deleted, expired or evicted). The zero Use is a pinned key of no
// client.
type Use struct {
	Kind   Kind
	Client uint64
}

// Key bookkeeping. With Config.MaxBytes or MaxKeysPerClient set, each shard
// has a second map, meta, for the keys that are evictable or were created
// by a client: the coarse instant of the key's last use (a uint32 of
// now>>useShift, about a second; 0 for a pinned key) and the client that
// created it (an index in Store.clients, 0 for none). Other keys are not
// in it and cost nothing more; a key in it costs one more map slot
// (metaEntryBytes, counted in Stats.Bytes).
//
// To admit a new key over the cap, reserve first sweeps the shard of
// expired states, then evicts the least recently used of evictSample
// evictable keys of the shard (Redis-style sampling: Go's map iteration
// starts at a random slot), up to maxEvictions times. It never looks at
// other shards: no operation holds two shard locks.

// keyMeta is a key's entry in its shard's meta map.
type keyMeta struct {
	used   uint32 // coarse last use of an evictable key; 0: pinned
	client uint32 // index+1 in Store.clients of its creator; 0: none
}

// metaEntryBytes: an 8-byte key and an 8-byte keyMeta, a 16-byte slot like
// the token map's.
const metaEntryBytes = tokenEntryBytes

// useShift makes a state's last use coarse: now>>30 counts units of about
// 1.07 s, which fit a uint32 until the year 2106.
const useShift = 30

// evictSample is how many evictable keys an eviction compares; Redis's
// maxmemory-samples default. evictScan bounds the entries it reads to find
// them (pinned keys of clients share the map).
const (
	evictSample = 5
	evictScan   = 64
)

// maxEvictions bounds the evictions one new key may cause (a large sliding
// log may need several small states to go).
const maxEvictions = 8

// useOf returns the coarse instant of a use at now, never 0.
func useOf(now int64) uint32 {
	return max(uint32(now>>useShift), 1)
}

// metaOf returns the meta map of key's shard, or nil when the store keeps
// none. The caller holds the shard's lock.
func (s *Store) metaOf(key uint64) *map[uint64]keyMeta {
	if s.meta == nil {
		return nil
	}
	return &s.meta[s.shardIndex(key)]
}

// metaAt is metaOf for the shard sh.
func (s *Store) metaAt(sh *shard) *map[uint64]keyMeta {
	if s.meta == nil {
		return nil
	}
	i := (uintptr(unsafe.Pointer(sh)) - uintptr(unsafe.Pointer(&s.shards[0]))) / uintptr(shardSize)
	return &s.meta[i]
}

// touch records a use at now of key, which has a state, if as makes it
// evictable; otherwise it does nothing. A state that is evictable but not
// tracked yet (imported from another node, which does not send the kind)
// becomes tracked: its slot is added to Stats.Bytes. The caller holds the
// shard's lock.
func (s *Store) touch(key uint64, now int64, as Use) {
	if as.Kind != Evictable || s.meta == nil {
		return
	}
	m := &s.meta[s.shardIndex(key)]
	if *m == nil {
		*m = make(map[uint64]keyMeta)
	}
	old, ok := (*m)[key]
	(*m)[key] = keyMeta{used: useOf(now), client: old.client}
	if !ok {
		s.bytes.Add(metaEntryBytes)
	}
}

// track records the new key, whose state was just inserted under reserve:
// its kind and client (reserve's index, 0 for none). The caller holds the
// shard's lock.
func (s *Store) track(key uint64, now int64, kind Kind, client uint32) {
	if s.meta == nil || kind != Evictable && client == 0 {
		return
	}
	km := keyMeta{client: client}
	if kind == Evictable {
		km.used = useOf(now)
	}
	m := &s.meta[s.shardIndex(key)]
	if *m == nil {
		*m = make(map[uint64]keyMeta)
	}
	old, ok := (*m)[key]
	if ok && old.client != 0 { // another state of the key: keep its creator
		s.clients.release(client)
		km.client = old.client
	}
	(*m)[key] = km
	if !ok {
		s.bytes.Add(metaEntryBytes)
	}
}

// untrack forgets key, whose states are gone. The caller holds the shard's
// lock.
func (s *Store) untrack(key uint64) {
	if s.meta == nil {
		return
	}
	m := s.meta[s.shardIndex(key)]
	if len(m) == 0 {
		return
	}
	if km, ok := m[key]; ok {
		delete(m, key)
		s.bytes.Add(-metaEntryBytes)
		s.clients.release(km.client)
	}
}

// drop accounts for the removal of key's state of size bytes: forget, and
// untrack once the key has no state left.
func (s *Store) drop(sh *shard, key uint64, size int64) {
	s.forget(size)
	if s.meta != nil && !hasAny(sh, key) {
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
// the caller holds, used as as says. A new key of a client at
// Config.MaxKeysPerClient is refused with ErrClientFull. When the store is
// at its cap it first sweeps sh (if anything in it may have expired), then
// evicts the least recently used evictable keys of sh, then refuses with
// ErrFull. On success it returns the client's index for track (0 for
// none). The cap is soft under concurrency: shards insert in parallel, so
// Bytes may overshoot MaxBytes by a few entries.
func (s *Store) reserve(sh *shard, key uint64, now, size int64, as Use) (uint32, error) {
	var client uint32
	if as.Client != 0 && s.maxPerClient > 0 {
		var ok bool
		if client, ok = s.clients.acquire(as.Client, s.maxPerClient); !ok {
			s.clientRefused.Add(1)
			return 0, fmt.Errorf("%w: the client has %d live keys here, the most Config.MaxKeysPerClient allows", ErrClientFull, s.maxPerClient)
		}
	}
	need := size
	if s.meta != nil && (as.Kind == Evictable || client != 0) {
		need += metaEntryBytes // track adds it after the insert
	}
	if s.maxBytes > 0 && s.bytes.Load()+need > s.maxBytes {
		if now >= sh.sweepAt {
			s.evictedExpired.Add(uint64(s.sweepLocked(sh, now)))
		}
		for i := 0; s.bytes.Load()+need > s.maxBytes; i++ {
			if i == maxEvictions || !s.evictOne(sh, key) {
				b := s.bytes.Load()
				s.refused.Add(1)
				s.clients.release(client)
				return 0, fmt.Errorf("%w: new key of ~%d bytes refused, estimated %d of MaxBytes %d in use, no evictable key in its shard", ErrFull, need, b, s.maxBytes)
			}
		}
	}
	s.bytes.Add(size)
	s.keys.Add(1)
	return client, nil
}

// evictOne evicts the least recently used of up to evictSample evictable
// keys of sh (the shard of key) and reports whether there was one. The
// caller holds sh's lock.
func (s *Store) evictOne(sh *shard, key uint64) bool {
	m := s.metaOf(key)
	if m == nil || len(*m) == 0 {
		return false
	}
	var victim uint64
	var oldest uint32
	found, read := 0, 0
	for k, km := range *m {
		if km.used != 0 {
			if found == 0 || km.used < oldest {
				victim, oldest = k, km.used
			}
			found++
		}
		if read++; found == evictSample || read == evictScan {
			break
		}
	}
	if found == 0 {
		return false
	}
	removed, freed := deleteKey(sh, victim)
	s.keys.Add(-removed)
	s.bytes.Add(-freed)
	s.untrack(victim)
	s.evictedLRU.Add(uint64(removed))
	return true
}

// clientKeys counts the live keys each client created, for
// Config.MaxKeysPerClient: clients are interned to small indexes (kept in
// keyMeta), and a client's entry goes when its count drops to 0. Its lock
// is taken under a shard's lock, never the other way round.
type clientKeys struct {
	mu    sync.Mutex
	index map[uint64]uint32 // client tag -> index+1
	live  []int64           // by index: the client's live keys
	tags  []uint64          // by index: the client's tag
	free  []uint32          // unused indexes
}

// acquire counts a new key of the client tagged tag, unless it has max
// already, and returns its index+1.
func (c *clientKeys) acquire(tag uint64, most int64) (uint32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.index[tag]
	if !ok {
		if c.index == nil {
			c.index = make(map[uint64]uint32)
		}
		if n := len(c.free); n > 0 {
			id, c.free = c.free[n-1]+1, c.free[:n-1]
			c.tags[id-1] = tag
		} else {
			c.live, c.tags = append(c.live, 0), append(c.tags, tag)
			id = uint32(len(c.live))
		}
		c.index[tag] = id
	}
	if c.live[id-1] >= most {
		return 0, false
	}
	c.live[id-1]++
	return id, true
}

// release uncounts a key of the client id (index+1; 0 does nothing).
func (c *clientKeys) release(id uint32) {
	if id == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live[id-1]--; c.live[id-1] == 0 {
		delete(c.index, c.tags[id-1])
		c.free = append(c.free, id-1)
	}
}

// count returns the live keys of the client tagged tag.
func (c *clientKeys) count(tag uint64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.index[tag]; ok {
		return c.live[id-1]
	}
	return 0
}

// ClientKeys returns the live keys the client tagged client created in
// this store, as Config.MaxKeysPerClient counts them (0 without that cap).
func (s *Store) ClientKeys(client uint64) int64 {
	return s.clients.count(client)
}
