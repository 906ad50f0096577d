package limiter

import (
	"sync"
	"sync/atomic"

	"github.com/sluice-rl/sluice/store"
)

// transit holds the states that a handoff or a pass-on has taken out of
// the store while they travel to their owner (see handOffTo): a fetch
// meanwhile, from the owner deciding a key before the push lands, or
// from any member, still finds them (FetchMoved returns a copy; the
// push's copy then merges into it as the same state). Keys are removed
// when the push returns, the states being in the store again if it failed.
// Safe for concurrent use; has and appendMissing are one atomic load
// while nothing travels.
type transit struct {
	n  atomic.Int64 // len(m)
	mu sync.Mutex
	m  map[uint64]store.Entry
}

// add records entries as travelling.
func (t *transit) add(entries []store.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64]store.Entry{}
	}
	for _, e := range entries {
		t.m[e.Key] = e
	}
	t.n.Store(int64(len(t.m)))
}

// done removes entries, whose push has returned.
func (t *transit) done(entries []store.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range entries {
		delete(t.m, e.Key)
	}
	t.n.Store(int64(len(t.m)))
}

// has reports whether key's state is travelling.
func (t *transit) has(key uint64) bool {
	if t.n.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[key]
	return ok
}

// appendMissing appends to entries the travelling states of those of
// hashes that entries lacks.
func (t *transit) appendMissing(hashes []uint64, entries []store.Entry) []store.Entry {
	if t.n.Load() == 0 {
		return entries
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range hashes {
		e, ok := t.m[h]
		if ok && !containsKey(entries, h) {
			entries = append(entries, e)
		}
	}
	return entries
}

// extractTravelling takes the states of keys out of the store to send them,
// and records them as travelling, with no moment when a key is in neither:
// a fetch then would find nothing, and its caller count the key afresh.
// The states are recorded (as copies) before they leave the store, and
// replaced by those that left once they have; a key fetched away in between
// is no longer recorded. The caller calls transit.done with what it
// returns.
func (l *Limiter) extractTravelling(now int64, keys []uint64) []store.Entry {
	l.transit.add(l.store.Copy(now, keys))
	entries := l.store.Extract(now, keys)
	l.transit.replace(keys, entries)
	return entries
}

// replace sets keys' travelling states to those of entries: keys without
// one there are removed.
func (t *transit) replace(keys []uint64, entries []store.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64]store.Entry{}
	}
	for _, k := range keys {
		delete(t.m, k)
	}
	for _, e := range entries {
		t.m[e.Key] = e
	}
	t.n.Store(int64(len(t.m)))
}

// missingFrom returns those of hashes that entries has no state of.
func missingFrom(hashes []uint64, entries []store.Entry) []uint64 {
	var out []uint64
	for _, h := range hashes {
		if !containsKey(entries, h) {
			out = append(out, h)
		}
	}
	return out
}

// containsKey reports whether entries has a state of key.
func containsKey(entries []store.Entry, key uint64) bool {
	for _, e := range entries {
		if e.Key == key {
			return true
		}
	}
	return false
}
