package activity

import (
	"fmt"
	"sync"
	"testing"
)

func TestHotKeysExactWithoutSampling(t *testing.T) {
	h := NewHotKeys(8, 1)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				// 20 keys, at most 8 per stripe (hash % 4): key k is
				// checked k+1 times per goroutine round.
				k := uint64(i % 20)
				if uint64(i/20)%20 <= k {
					h.Observe(k, fmt.Sprint("k", k), "")
				}
			}
		}()
	}
	wg.Wait()
	top, total := h.Top(0)
	if len(top) != 20 {
		t.Fatalf("%d counters, want 20", len(top))
	}
	var sum uint64
	for i, c := range top {
		sum += c.Count
		k := uint64(19 - i)
		if c.Hash != k || c.Key != fmt.Sprint("k", k) || c.Err != 0 {
			t.Errorf("top[%d] = %+v, want key %d exactly", i, c, k)
		}
	}
	if sum != total {
		t.Errorf("counts sum to %d, total %d", sum, total)
	}
	if h.Capacity() != 32 || h.SampleEvery() != 1 {
		t.Errorf("Capacity %d SampleEvery %d", h.Capacity(), h.SampleEvery())
	}
}

func TestHotKeysSampledFindsHotKey(t *testing.T) {
	h := NewHotKeys(16, 8)
	items := append(uniform(20000, 5000, 9), repeat(42, 4000)...)
	for _, x := range items {
		h.Observe(x, "", "")
	}
	top, total := h.Top(3)
	if len(top) != 3 || top[0].Hash != 42 {
		t.Fatalf("Top(3) = %+v, want 42 first", top)
	}
	// 4000 checks sampled 1 in 8: the estimate is within a few standard
	// deviations (sqrt(500*7/8)*8 ~ 170).
	if c := top[0].Count - top[0].Err; c < 3000 || top[0].Count > 5000+top[0].Err {
		t.Errorf("hot key estimated %d (err %d), want ~4000", top[0].Count, top[0].Err)
	}
	if total < 20000 || total > 28000 {
		t.Errorf("total %d, want ~24000", total)
	}
}

func TestSeries(t *testing.T) {
	s := NewSeries(3)
	if got := s.Last(0); len(got) != 0 {
		t.Errorf("Last before a tick = %v", got)
	}
	for i := range uint64(5) {
		s.Add(10*(i+1), i)
		s.Tick()
	}
	s.Add(99, 99) // open interval: not in Last
	want := []Point{{30, 2}, {40, 3}, {50, 4}}
	if got := s.Last(0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Last(0) = %v, want %v", got, want)
	}
	if got := s.Last(2); fmt.Sprint(got) != fmt.Sprint(want[1:]) {
		t.Errorf("Last(2) = %v, want %v", got, want[1:])
	}
	if got := s.Last(10); len(got) != 3 {
		t.Errorf("Last(10) = %v", got)
	}
	if s.Slots() != 3 {
		t.Errorf("Slots = %d", s.Slots())
	}
}

func TestRecorderDefaults(t *testing.T) {
	r := New(Config{})
	if r.Interval != DefaultInterval || r.Series.Slots() != DefaultSlots ||
		r.Hot.Capacity() != hotStripes*DefaultCapacity || r.Hot.SampleEvery() != DefaultSampleEvery {
		t.Errorf("defaults: %+v %d %d %d", r, r.Series.Slots(), r.Hot.Capacity(), r.Hot.SampleEvery())
	}
}

// BenchmarkHotKeysObserve is the hot-path cost of the hot-keys sketch per
// checked item, from all cores at once, over a Zipf(1.1) mix of 100000 keys.
func BenchmarkHotKeysObserve(b *testing.B) {
	keys := zipf(1<<16, 100000, 1.1, 10)
	labels := make([]string, len(keys))
	for i, k := range keys {
		labels[i] = fmt.Sprint("user:", k)
	}
	for _, every := range []int{1, 4, DefaultSampleEvery, 16} {
		b.Run(fmt.Sprintf("sample=1in%d", every), func(b *testing.B) {
			h := NewHotKeys(DefaultCapacity, every)
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					j := i & (len(keys) - 1)
					h.Observe(keys[j], labels[j], "api")
					i++
				}
			})
		})
	}
}

// BenchmarkSeriesAdd is the per-batch cost of the rate series.
func BenchmarkSeriesAdd(b *testing.B) {
	s := NewSeries(DefaultSlots)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Add(1, 0)
		}
	})
}

// Rotate keeps two generations: a key not checked for two rotations
// leaves the list.
func TestHotKeysRotate(t *testing.T) {
	h := NewHotKeys(4, 1)
	h.Observe(1, "old", "")
	h.Rotate()
	h.Observe(2, "new", "")
	h.Observe(1, "old", "")
	if top, total := h.Top(0); len(top) != 2 || top[0].Key != "old" || top[0].Count != 2 || total != 3 {
		t.Errorf("after one rotation: %+v total %d, want old 2, new 1", top, total)
	}
	h.Rotate()
	h.Rotate()
	if top, total := h.Top(0); len(top) != 0 || total != 0 {
		t.Errorf("after three rotations: %+v total %d, want none", top, total)
	}
}

func TestRecorderTickRotates(t *testing.T) {
	r := New(Config{Slots: 10, Generation: 3, SampleEvery: 1})
	r.Hot.Observe(1, "k", "")
	for range 5 {
		r.Tick()
	}
	if top, _ := r.Hot.Top(0); len(top) != 1 {
		t.Fatalf("after 5 ticks (one rotation): %+v, want k", top)
	}
	r.Tick() // the second rotation
	if top, _ := r.Hot.Top(0); len(top) != 0 {
		t.Errorf("after 6 ticks (two rotations): %+v, want none", top)
	}
	if got := len(r.Series.Last(0)); got != 6 {
		t.Errorf("%d intervals, want 6", got)
	}
	if d := New(Config{}); d.Generation != DefaultSlots {
		t.Errorf("default generation %d, want %d", d.Generation, DefaultSlots)
	}
}
