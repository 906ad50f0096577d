package store

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// TestConcurrentTakesAdmitExactly has 64 goroutines take 1,000 units each
// from one key limited to 10,000/hour at a fixed instant: exactly 10,000
// must be admitted, whatever the interleaving.
func TestConcurrentTakesAdmitExactly(t *testing.T) {
	const goroutines, perG, limit = 64, 1000, 10000
	for _, l := range []bucket.Limit{
		lim(bucket.TokenBucket, limit, time.Hour),
		lim(bucket.FixedWindow, limit, time.Hour),
		lim(bucket.SlidingWindow, limit, time.Hour),
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			s := newStore(t, DefaultConfig())
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					for range perG {
						res, err := s.Take(0xC0FFEE, l, t0, 1)
						if err != nil {
							t.Error(err)
							return
						}
						if res.Allowed {
							allowed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := allowed.Load(); got != limit {
				t.Fatalf("admitted %d of %d takes, want exactly %d", got, goroutines*perG, limit)
			}
			checkCounters(t, s)
		})
	}
}

// TestConcurrentLogAndLeases does the same for the sliding log and leases
// (smaller, as a log take is linear in its length), and checks that lease
// IDs handed out concurrently are distinct.
func TestConcurrentLogAndLeases(t *testing.T) {
	const goroutines, perG, limit = 16, 100, 1000
	s := newStore(t, Config{Shards: 4})
	ll := lim(bucket.SlidingLog, limit, time.Hour)
	cl := lim(bucket.Concurrency, limit, 0)
	var logAllowed atomic.Int64
	ids := make([][]LeaseID, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range 2 * perG {
				// Distinct instants, so that the log grows one entry per take.
				now := t0 + int64(g*2*perG+i)
				if res, err := s.Take(7, ll, now, 1); err != nil {
					t.Error(err)
				} else if res.Allowed {
					logAllowed.Add(1)
				}
				id, _, err := s.Acquire(7, cl, t0, 1, time.Hour)
				if err != nil {
					t.Error(err)
				} else if !id.IsZero() {
					ids[g] = append(ids[g], id)
				}
			}
		})
	}
	wg.Wait()
	if got := logAllowed.Load(); got != limit {
		t.Fatalf("log admitted %d, want %d", got, limit)
	}
	seen := make(map[LeaseID]bool)
	for _, l := range ids {
		for _, id := range l {
			if seen[id] {
				t.Fatalf("lease ID %v handed out twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != limit {
		t.Fatalf("%d leases granted, want %d", len(seen), limit)
	}
	checkCounters(t, s)
}

// TestConcurrentMixedOperations runs takes of every kind on many keys while
// other goroutines sweep, export, import and delete, then checks that the
// store's counters match its maps. Run with -race.
func TestConcurrentMixedOperations(t *testing.T) {
	s := newStore(t, Config{Shards: 16, MaxBytes: 64 << 10})
	other := newStore(t, Config{Shards: 8})
	limits := append(takeLimits[:len(takeLimits):len(takeLimits)], lim(bucket.TokenBucket, 5, time.Second))
	cl := lim(bucket.Concurrency, 3, 0)
	var takers, maint sync.WaitGroup
	var stop atomic.Bool
	for g := range 4 {
		takers.Go(func() {
			x := uint64(g)
			for i := range 3000 {
				now := t0 + int64(i)*ms
				key := splitmix64(&x) % 512
				l := limits[i%len(limits)]
				if _, err := s.Take(key, l, now, int64(i%3)); err != nil && !errors.Is(err, ErrFull) {
					t.Error(err)
				}
				id, _, err := s.Acquire(key, cl, now, 1, 50*time.Millisecond)
				if err != nil && !errors.Is(err, ErrFull) {
					t.Error(err)
				}
				if !id.IsZero() && i%2 == 0 {
					if _, _, err := s.Release(key, cl, now, id); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	maint.Go(func() {
		for i := int64(0); !stop.Load(); i++ {
			now := t0 + i*10*ms
			s.Sweep(now)
			s.Export(now, func(k uint64) bool { return k%7 == 0 }, func(e Entry) bool {
				if err := other.Import(e, now); err != nil {
					t.Error(err)
				}
				return true
			})
			s.DeleteIf(func(k uint64) bool { return k%7 == 0 && i%3 == 0 })
			_ = s.Stats()
		}
	})
	takers.Wait()
	stop.Store(true)
	maint.Wait()
	checkCounters(t, s)
	checkCounters(t, other)
	if s.Stats().Refused == 0 {
		t.Fatal("the cap never refused a key: the test does not exercise it")
	}
}
