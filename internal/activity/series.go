package activity

import (
	"sync"
	"sync/atomic"
)

// Point is what one interval of a Series counted.
type Point struct {
	Checks, Denials uint64
}

// Series counts checks and denials per interval in a fixed ring of slots:
// Add accumulates into the open interval, Tick closes it into the ring
// (overwriting the oldest slot once the ring is full). The caller ticks at
// a steady pace; Series itself keeps no time. It is safe for concurrent use.
type Series struct {
	checks, denials atomic.Uint64

	mu    sync.Mutex
	slots []Point
	next  int // slot the next Tick writes
	n     int // closed slots held
}

// NewSeries returns a Series of slots closed intervals (at least 1).
func NewSeries(slots int) *Series {
	return &Series{slots: make([]Point, max(slots, 1))}
}

// Add counts checks, of which denials were denied, in the open interval.
func (s *Series) Add(checks, denials uint64) {
	s.checks.Add(checks)
	if denials > 0 {
		s.denials.Add(denials)
	}
}

// Tick closes the open interval.
func (s *Series) Tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slots[s.next] = Point{Checks: s.checks.Swap(0), Denials: s.denials.Swap(0)}
	s.next = (s.next + 1) % len(s.slots)
	s.n = min(s.n+1, len(s.slots))
}

// Last returns up to k of the latest closed intervals (all held when
// k <= 0), oldest first.
func (s *Series) Last(k int) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k <= 0 || k > s.n {
		k = s.n
	}
	out := make([]Point, k)
	for i := range out {
		out[i] = s.slots[(s.next-k+i+len(s.slots))%len(s.slots)]
	}
	return out
}

// Slots returns the ring's size.
func (s *Series) Slots() int { return len(s.slots) }
