package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// TakeAll charges every item when all are allowed, and none when one is
// denied: not the allowed ones, not the denied hits of fixed_window_hits,
// not a key taken twice.
func TestTakeAllAllOrNothing(t *testing.T) {
	s := newStore(t, Config{TrackChanges: true})
	ip := lim(bucket.TokenBucket, 10, time.Hour)
	user := lim(bucket.FixedWindow, 2, time.Hour)
	hits := lim(bucket.FixedWindowHits, 5, time.Hour)
	log := lim(bucket.SlidingLog, 5, time.Hour)
	items := []AtomicItem{{Key: 1, Limit: ip, Cost: 1}, {Key: 2, Limit: user, Cost: 1}, {Key: 3, Limit: hits, Cost: 1}, {Key: 4, Limit: log, Cost: 1}}
	out := make([]bucket.Result, len(items))
	for i := 0; i < 2; i++ {
		if ok, err := s.TakeAll(items, t0, out); !ok || err != nil {
			t.Fatalf("call %d: %v %v %+v", i, ok, err, out)
		}
	}
	ok, err := s.TakeAll(items, t0, out)
	if ok || err != nil {
		t.Fatalf("third call past user's limit of 2: kept %v, %v", ok, err)
	}
	if !out[0].Allowed || out[1].Allowed || out[1].RetryAfter <= 0 {
		t.Fatalf("verdicts: %+v", out)
	}
	if out[0].Remaining != 8 {
		t.Fatalf("a denied call reports ip at %d left, want 8 (its state put back)", out[0].Remaining)
	}
	for i, want := range []int64{8, 0, 3, 3} {
		res, err := s.Take(items[i].Key, items[i].Limit, t0, 0)
		if err != nil || res.Remaining != want {
			t.Fatalf("item %d after a denied call: %+v %v, want %d left", i, res, err, want)
		}
	}
	// A key twice in one call: 2 and 1 of a token bucket of 2 is denied
	// and charges nothing.
	two := lim(bucket.TokenBucket, 2, time.Hour)
	dup := []AtomicItem{{Key: 9, Limit: two, Cost: 2}, {Key: 9, Limit: two, Cost: 1}}
	if ok, _ := s.TakeAll(dup, t0, out); ok {
		t.Fatal("3 of a bucket of 2 kept")
	}
	if res, _ := s.Take(9, two, t0, 0); res.Remaining != 2 {
		t.Fatalf("key 9 after a denied call: %d left, want 2", res.Remaining)
	}
	if st := s.Stats(); st.Keys != 4 {
		t.Fatalf("stored keys %d, want 4 (nothing left by the denied calls)", st.Keys)
	}
	if _, err := s.TakeAll([]AtomicItem{{Key: 1, Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 1}, Cost: 1}}, t0, out); err == nil {
		t.Fatal("a concurrency item passed")
	}
}

// Under concurrency, calls of two items sharing a scarce key admit exactly
// that key's limit, and charge the other keys only for the calls admitted.
func TestTakeAllConcurrentAudit(t *testing.T) {
	s := newStore(t, Config{Shards: 4})
	shared := lim(bucket.TokenBucket, 50, time.Hour)
	own := lim(bucket.FixedWindow, 1000, time.Hour)
	var admitted atomic.Int64
	perKey := make([]atomic.Int64, 8)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]bucket.Result, 2)
			for i := 0; i < 100; i++ {
				ok, err := s.TakeAll([]AtomicItem{{Key: 100 + uint64(g), Limit: own, Cost: 1}, {Key: 1, Limit: shared, Cost: 1}}, t0, out)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					admitted.Add(1)
					perKey[g].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 50 {
		t.Fatalf("admitted %d, want exactly 50", admitted.Load())
	}
	for g := range perKey {
		res, _ := s.Take(100+uint64(g), own, t0, 0)
		if used := 1000 - res.Remaining; used != perKey[g].Load() {
			t.Fatalf("key %d charged %d for %d admitted calls", g, used, perKey[g].Load())
		}
	}
}

// BenchmarkTakeAll2 is an atomic take of two keys, against
// BenchmarkTake2, the same two keys taken one by one.
func BenchmarkTakeAll2(b *testing.B) {
	s := newStore(b, Config{})
	l := lim(bucket.TokenBucket, 1<<30, time.Second)
	items := []AtomicItem{{Key: 1, Limit: l, Cost: 1}, {Key: 2, Limit: l, Cost: 1}}
	out := make([]bucket.Result, 2)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := s.TakeAll(items, t0+int64(i), out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTake2(b *testing.B) {
	s := newStore(b, Config{})
	l := lim(bucket.TokenBucket, 1<<30, time.Second)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for _, k := range []uint64{1, 2} {
			if _, err := s.Take(k, l, t0+int64(i), 1); err != nil {
				b.Fatal(err)
			}
		}
	}
}
