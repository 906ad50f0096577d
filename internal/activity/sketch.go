package activity

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxLabelBytes bounds the key kept with a counter: a longer key is cut
// (at a rune boundary) and marked with "…".
const MaxLabelBytes = 128

// Counter is one key monitored by a Sketch. Its true count lies in
// [Count-Err, Count]: Err is what the counter held when it was taken over
// from the key it last counted (0 for a key counted from the start).
type Counter struct {
	Hash   uint64
	Key    string // as given to Add when the counter was taken; may be ""
	Policy string
	Count  uint64
	Err    uint64
}

// Sketch is a Space-Saving sketch of at most its capacity counters, kept
// as a min-heap on Count with an index by hash, so an Add is O(log k).
// While fewer distinct hashes than its capacity have been added, every
// count is exact. After that, with N the total weight added and k the
// capacity, every counter's Err is at most N/k, and every hash whose true
// count exceeds N/k is monitored. It is not safe for concurrent use.
type Sketch struct {
	heap  []Counter
	index map[uint64]int // hash -> position in heap
	total uint64
}

// NewSketch returns a Sketch of capacity counters (at least 1).
func NewSketch(capacity int) *Sketch {
	capacity = max(capacity, 1)
	return &Sketch{heap: make([]Counter, 0, capacity), index: make(map[uint64]int, capacity)}
}

// Capacity returns the number of counters.
func (s *Sketch) Capacity() int { return cap(s.heap) }

// Total returns the total weight added.
func (s *Sketch) Total() uint64 { return s.total }

// Add counts w occurrences of hash. key and policy label the counter hash
// takes when it has none; they are copied then (see label), so the caller's
// strings may share a buffer that is reused.
func (s *Sketch) Add(hash uint64, key, policy string, w uint64) {
	s.total += w
	if i, ok := s.index[hash]; ok {
		s.heap[i].Count += w
		s.down(i)
		return
	}
	if len(s.heap) < cap(s.heap) {
		s.heap = append(s.heap, Counter{Hash: hash, Key: label(key), Policy: label(policy), Count: w})
		s.index[hash] = len(s.heap) - 1
		s.up(len(s.heap) - 1)
		return
	}
	// Full: the key takes over the smallest counter, inheriting its count
	// as its error.
	m := &s.heap[0]
	delete(s.index, m.Hash)
	*m = Counter{Hash: hash, Key: label(key), Policy: label(policy), Count: m.Count + w, Err: m.Count}
	s.index[hash] = 0
	s.down(0)
}

// Top returns up to n counters (all when n <= 0), largest Count first;
// ties by smaller Err, then by hash.
func (s *Sketch) Top(n int) []Counter {
	out := slices.Clone(s.heap)
	sortCounters(out)
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// Reset forgets every counter and the total.
func (s *Sketch) Reset() {
	s.heap = s.heap[:0]
	clear(s.index)
	s.total = 0
}

// merge appends to dst the counters of a and b (two sketches of disjoint
// parts of one stream) merged: a hash in both sums its counts and errors;
// a hash in one alone may have been counted in the other up to that
// one's smallest counter (0 while it is not full), which is added to its
// Count and Err. So the true count over both parts stays within
// [Count-Err, Count] (Agarwal et al., "Mergeable summaries", 2012).
func merge(dst []Counter, a, b *Sketch) []Counter {
	ma, mb := a.floor(), b.floor()
	for _, c := range a.heap {
		if j, ok := b.index[c.Hash]; ok {
			c.Count += b.heap[j].Count
			c.Err += b.heap[j].Err
		} else {
			c.Count += mb
			c.Err += mb
		}
		dst = append(dst, c)
	}
	for _, c := range b.heap {
		if _, ok := a.index[c.Hash]; !ok {
			c.Count += ma
			c.Err += ma
			dst = append(dst, c)
		}
	}
	return dst
}

// floor is the most a hash without a counter may have been counted: the
// smallest counter of a full sketch, 0 otherwise.
func (s *Sketch) floor() uint64 {
	if len(s.heap) < cap(s.heap) {
		return 0
	}
	return s.heap[0].Count
}

func sortCounters(cs []Counter) {
	slices.SortFunc(cs, func(a, b Counter) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Err, b.Err); c != 0 {
			return c
		}
		return cmp.Compare(a.Hash, b.Hash)
	})
}

func (s *Sketch) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.index[s.heap[i].Hash] = i
	s.index[s.heap[j].Hash] = j
}

func (s *Sketch) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].Count <= s.heap[i].Count {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *Sketch) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.heap[r].Count < s.heap[l].Count {
			m = r
		}
		if s.heap[i].Count <= s.heap[m].Count {
			return
		}
		s.swap(i, m)
		i = m
	}
}

// label returns a copy of s of at most MaxLabelBytes bytes (plus the mark
// of a cut).
func label(s string) string {
	if len(s) <= MaxLabelBytes {
		return strings.Clone(s)
	}
	cut := MaxLabelBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…" // the concatenation copies
}
