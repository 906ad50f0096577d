package activity

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// stream is a sequence of hashes with their true counts.
type stream struct {
	items []uint64
	truth map[uint64]uint64
}

func makeStream(items []uint64) stream {
	s := stream{items: items, truth: map[uint64]uint64{}}
	for _, h := range items {
		s.truth[h]++
	}
	return s
}

// zipf draws n items from distinct keys with skew s (deterministic seed).
func zipf(n, distinct int, s float64, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	z := rand.NewZipf(r, s, 1, uint64(distinct-1))
	out := make([]uint64, n)
	for i := range out {
		out[i] = z.Uint64() + 1000
	}
	return out
}

func uniform(n, distinct int, seed uint64) []uint64 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]uint64, n)
	for i := range out {
		out[i] = r.Uint64N(uint64(distinct)) + 1000
	}
	return out
}

func repeat(h uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = h
	}
	return out
}

func TestSketch(t *testing.T) {
	cases := []struct {
		name     string
		capacity int
		items    []uint64
		// top, if non-zero, must be the first counter.
		top uint64
	}{
		{"empty", 4, nil, 0},
		{"one key", 4, repeat(7, 100), 7},
		{"fewer keys than capacity", 64, uniform(10000, 50, 1), 0},
		{"as many keys as capacity", 64, uniform(10000, 64, 2), 0},
		{"capacity 1, one key", 1, repeat(3, 10), 3},
		{"capacity 1, many keys", 1, uniform(1000, 10, 3), 0},
		{"zipf over 10000 keys", 64, zipf(200000, 10000, 1.2, 4), 1000},
		{"zipf, small sketch", 8, zipf(50000, 5000, 1.5, 5), 1000},
		{"uniform over many keys", 64, uniform(50000, 20000, 6), 0},
		{"hot key after cold ones", 16, append(uniform(5000, 5000, 7), repeat(42, 2000)...), 42},
		{"hot key among cold ones", 16, append(repeat(42, 2000), uniform(5000, 5000, 8)...), 42},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := makeStream(tc.items)
			s := NewSketch(tc.capacity)
			for _, h := range st.items {
				s.Add(h, fmt.Sprint("key:", h), "p", 1)
			}
			checkSketch(t, s, st)
			if tc.top != 0 {
				if top := s.Top(1); len(top) != 1 || top[0].Hash != tc.top {
					t.Errorf("Top(1) = %+v, want hash %d", top, tc.top)
				}
			}
		})
	}
}

// checkSketch checks the Space-Saving guarantees of s against the truth.
func checkSketch(t *testing.T, s *Sketch, st stream) {
	t.Helper()
	n, k := uint64(len(st.items)), uint64(s.Capacity())
	if s.Total() != n {
		t.Errorf("Total = %d, want %d", s.Total(), n)
	}
	top := s.Top(0)
	exact := len(st.truth) <= s.Capacity()
	if want := min(len(st.truth), s.Capacity()); len(top) != want {
		t.Errorf("%d counters, want %d", len(top), want)
	}
	seen := map[uint64]bool{}
	var sum uint64
	for i, c := range top {
		seen[c.Hash] = true
		sum += c.Count
		if i > 0 && top[i-1].Count < c.Count {
			t.Errorf("Top not sorted at %d: %d < %d", i, top[i-1].Count, c.Count)
		}
		if want := fmt.Sprint("key:", c.Hash); c.Key != want || c.Policy != "p" {
			t.Errorf("counter %d labelled %q/%q, want %q/p", c.Hash, c.Key, c.Policy, want)
		}
		truth := st.truth[c.Hash]
		if exact && (c.Count != truth || c.Err != 0) {
			t.Errorf("key %d: count %d err %d, want exactly %d", c.Hash, c.Count, c.Err, truth)
		}
		if c.Count < truth || c.Count-c.Err > truth {
			t.Errorf("key %d: true count %d outside [%d, %d]", c.Hash, truth, c.Count-c.Err, c.Count)
		}
		if c.Err > n/k {
			t.Errorf("key %d: err %d > N/k = %d", c.Hash, c.Err, n/k)
		}
	}
	if len(top) == s.Capacity() && sum != n {
		t.Errorf("counts of a full sketch sum to %d, want N = %d", sum, n)
	}
	for h, c := range st.truth {
		if c > n/k && !seen[h] {
			t.Errorf("key %d: true count %d > N/k = %d but not monitored", h, c, n/k)
		}
	}
}

func TestSketchWeightsAndReset(t *testing.T) {
	s := NewSketch(2)
	s.Add(1, "a", "", 5)
	s.Add(2, "b", "", 3)
	s.Add(3, "c", "", 1) // takes b's counter: count 4, err 3
	got := s.Top(0)
	want := []Counter{{Hash: 1, Key: "a", Count: 5}, {Hash: 3, Key: "c", Count: 4, Err: 3}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Top = %+v, want %+v", got, want)
	}
	s.Reset()
	if s.Total() != 0 || len(s.Top(0)) != 0 {
		t.Errorf("after Reset: total %d, %d counters", s.Total(), len(s.Top(0)))
	}
}

func TestLabel(t *testing.T) {
	long := strings.Repeat("é", MaxLabelBytes) // 2 bytes a rune
	cases := []struct{ in, want string }{
		{"", ""},
		{"user:42", "user:42"},
		{strings.Repeat("x", MaxLabelBytes), strings.Repeat("x", MaxLabelBytes)},
		{strings.Repeat("x", MaxLabelBytes+1), strings.Repeat("x", MaxLabelBytes) + "…"},
		{"x" + long, "x" + strings.Repeat("é", (MaxLabelBytes-1)/2) + "…"},
	}
	for _, tc := range cases {
		if got := label(tc.in); got != tc.want {
			t.Errorf("label(%d bytes) = %q, want %q", len(tc.in), got, tc.want)
		}
	}
}

// Two sketches of consecutive parts of a stream, merged, keep the bounds
// over the whole stream: true count in [Count-Err, Count], Err at most
// N1/k + N2/k, every key above that listed; exact while neither is full.
func TestMerge(t *testing.T) {
	cases := []struct {
		name     string
		capacity int
		a, b     []uint64
		top      uint64
	}{
		{"both empty", 4, nil, nil, 0},
		{"one empty", 4, repeat(1, 5), nil, 1},
		{"under capacity, shared keys", 16, uniform(1000, 10, 1), uniform(1000, 12, 2), 0},
		{"hot then cold", 16, repeat(42, 3000), uniform(5000, 3000, 3), 42},
		{"cold then hot", 16, uniform(5000, 3000, 4), repeat(42, 3000), 42},
		{"zipf both", 32, zipf(40000, 5000, 1.3, 5), zipf(40000, 5000, 1.3, 6), 1000},
		{"disjoint heavy keys", 8, append(repeat(7, 900), uniform(3000, 2000, 7)...), append(repeat(9, 1000), uniform(3000, 2000, 8)...), 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sa, sb := NewSketch(tc.capacity), NewSketch(tc.capacity)
			truth := map[uint64]uint64{}
			for _, h := range tc.a {
				sa.Add(h, "", "", 1)
				truth[h]++
			}
			for _, h := range tc.b {
				sb.Add(h, "", "", 1)
				truth[h]++
			}
			merged := merge(nil, sa, sb)
			sortCounters(merged)
			k := uint64(tc.capacity)
			bound := uint64(len(tc.a))/k + uint64(len(tc.b))/k
			exact := sa.floor() == 0 && sb.floor() == 0
			seen := map[uint64]bool{}
			for _, c := range merged {
				if seen[c.Hash] {
					t.Errorf("hash %d merged twice", c.Hash)
				}
				seen[c.Hash] = true
				tr := truth[c.Hash]
				if c.Count < tr || c.Count-c.Err > tr {
					t.Errorf("key %d: true %d outside [%d, %d]", c.Hash, tr, c.Count-c.Err, c.Count)
				}
				if c.Err > bound || (exact && (c.Err != 0 || c.Count != tr)) {
					t.Errorf("key %d: count %d err %d (true %d, bound %d, exact %v)", c.Hash, c.Count, c.Err, tr, bound, exact)
				}
			}
			for h, c := range truth {
				if c > bound && !seen[h] {
					t.Errorf("key %d: true %d > %d but not merged", h, c, bound)
				}
			}
			if tc.top != 0 && (len(merged) == 0 || merged[0].Hash != tc.top) {
				t.Errorf("top = %+v, want %d", merged[:min(len(merged), 3)], tc.top)
			}
		})
	}
}
