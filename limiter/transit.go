package limiter

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-rl/sluice/store"
)

// transit holds the states that a handoff or a pass-on has taken out of
// the store while they travel to their owner (see handOffTo): a fetch
// meanwhile, from the owner deciding a key before the push lands, or
// from any member, still finds them (FetchMoved returns a copy; the
// push's copy then merges into it as the same state). Each push records
// its own states and removes only those when it returns (the states being
// in the store again if it failed): two pushes of one key may overlap (a
// handoff, then a pass-on of the state a fetch brought back meanwhile),
// and the first to return must not hide the other's. Safe for concurrent
// use; has and appendMissing are one atomic load while nothing travels.
type transit struct {
	n    atomic.Int64 // len(m)
	mu   sync.Mutex
	m    map[uint64][]travelling // by key; a key's records in push order
	last uint64                  // the last push's id
}

// travelling is one push's state of a key.
type travelling struct {
	push uint64
	e    store.Entry
}

// push is one push's record in transit: transit.done ends it.
type push struct {
	id   uint64
	keys []uint64
}

// begin starts recording a push of keys.
func (t *transit) begin(keys []uint64) push {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last++
	return push{id: t.last, keys: slices.Clone(keys)}
}

// set records entries as p's travelling states of p's keys, in place of
// what p recorded before: p's keys without one in entries are not
// travelling with p.
func (t *transit) set(p push, entries []store.Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[uint64][]travelling{}
	}
	t.removeLocked(p)
	for _, e := range entries {
		t.m[e.Key] = append(t.m[e.Key], travelling{push: p.id, e: e})
	}
	t.n.Store(int64(len(t.m)))
}

// done ends push p, which has returned.
func (t *transit) done(p push) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(p)
	t.n.Store(int64(len(t.m)))
}

// removeLocked removes p's records. t.mu is held.
func (t *transit) removeLocked(p push) {
	for _, k := range p.keys {
		recs := slices.DeleteFunc(t.m[k], func(r travelling) bool { return r.push == p.id })
		if len(recs) == 0 {
			delete(t.m, k)
		} else {
			t.m[k] = recs
		}
	}
}

// has reports whether key's state is travelling.
func (t *transit) has(key uint64) bool {
	if t.n.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m[key]) > 0
}

// appendMissing appends to entries the travelling states of those of
// hashes that entries lacks: every push's, the importer merging them.
func (t *transit) appendMissing(hashes []uint64, entries []store.Entry) []store.Entry {
	if t.n.Load() == 0 {
		return entries
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(entries)
	for _, h := range hashes {
		if containsKey(entries[:n], h) {
			continue
		}
		for _, r := range t.m[h] {
			entries = append(entries, r.e)
		}
	}
	return entries
}

// extractTravelling takes the states of keys out of the store to send them,
// and records them as travelling, with no moment when a key is in neither:
// a fetch then would find nothing, and its caller count the key afresh.
// The states are recorded (as copies) before they leave the store, and
// replaced by those that left once they have; a key fetched away in between
// is no longer recorded. The caller calls transit.done with the push it
// returns once the states have been sent (or put back).
func (l *Limiter) extractTravelling(now int64, keys []uint64) ([]store.Entry, push) {
	p := l.transit.begin(keys)
	l.transit.set(p, l.store.Copy(now, keys))
	entries := l.store.Extract(now, keys)
	l.transit.set(p, entries)
	return entries, p
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
