package activity

import (
	"math/rand/v2"
	"sync"
)

// hotStripes is the number of independent sketches of a HotKeys, chosen by
// hash: concurrent checks of different keys rarely wait for one another.
const hotStripes = 4

// HotKeys finds the most checked keys: hotStripes Space-Saving sketches,
// each of a fixed capacity and guarded by its own mutex, fed a sample of
// the checks (1 in every, each counting every). Every key lands in one
// stripe, so each stripe's bound holds for its share of the stream.
//
// Each stripe keeps two generations: Rotate drops the older and starts a
// new one, and Top merges the two, so with a Rotate every T the list
// covers the last T to 2T. It is safe for concurrent use.
type HotKeys struct {
	every   uint64
	stripes [hotStripes]hotStripe
}

type hotStripe struct {
	mu        sync.Mutex
	cur, prev *Sketch
	_         [40]byte // keep stripes on separate cache lines
}

// NewHotKeys returns a HotKeys of hotStripes sketches of capacity counters
// that counts 1 check in every (1: all), weighing each every.
func NewHotKeys(capacity, every int) *HotKeys {
	h := &HotKeys{every: uint64(max(every, 1))}
	for i := range h.stripes {
		h.stripes[i].cur, h.stripes[i].prev = NewSketch(capacity), NewSketch(capacity)
	}
	return h
}

// Observe counts one check of hash (sampled). See Sketch.Add for key and
// policy.
func (h *HotKeys) Observe(hash uint64, key, policy string) {
	if h.every > 1 && rand.Uint64N(h.every) != 0 {
		return
	}
	st := &h.stripes[hash%hotStripes]
	st.mu.Lock()
	st.cur.Add(hash, key, policy, h.every)
	st.mu.Unlock()
}

// Rotate starts a new generation, dropping the older of the two.
func (h *HotKeys) Rotate() {
	for i := range h.stripes {
		st := &h.stripes[i]
		st.mu.Lock()
		st.prev, st.cur = st.cur, st.prev
		st.cur.Reset()
		st.mu.Unlock()
	}
}

// Top returns the n counters of largest Count over every stripe and both
// generations (all when n <= 0), and the total weight they counted.
func (h *HotKeys) Top(n int) ([]Counter, uint64) {
	var all []Counter
	var total uint64
	for i := range h.stripes {
		st := &h.stripes[i]
		st.mu.Lock()
		all = merge(all, st.cur, st.prev)
		total += st.cur.total + st.prev.total
		st.mu.Unlock()
	}
	sortCounters(all)
	if n > 0 && len(all) > n {
		all = all[:n]
	}
	return all, total
}

// Capacity returns the counters of all stripes in one generation.
func (h *HotKeys) Capacity() int { return hotStripes * h.stripes[0].cur.Capacity() }

// SampleEvery returns 1 in how many checks is counted.
func (h *HotKeys) SampleEvery() int { return int(h.every) }
