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

// containsKey reports whether entries has a state of key.
func containsKey(entries []store.Entry, key uint64) bool {
	for _, e := range entries {
		if e.Key == key {
			return true
		}
	}
	return false
}
