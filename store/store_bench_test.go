package store

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// benchLimit never denies in a benchmark: a billion units per hour, each
// take pushing the TAT 3.6µs further.
var benchLimit = lim(bucket.TokenBucket, 1_000_000_000, time.Hour)

// benchKeys returns n distinct, well-spread key hashes (n a power of two)
// and a store in which each of them already holds a token state.
func benchKeys(b *testing.B, n int) (*Store, []uint64) {
	b.Helper()
	return benchKeysIn(b, n, DefaultConfig())
}

// benchKeysIn is benchKeys with a store of cfg.
func benchKeysIn(b *testing.B, n int, cfg Config) (*Store, []uint64) {
	b.Helper()
	s := newStore(b, cfg)
	keys := make([]uint64, n)
	x := uint64(n)
	for i := range keys {
		keys[i] = splitmix64(&x)
		if _, err := s.Take(keys[i], benchLimit, t0, 1); err != nil {
			b.Fatal(err)
		}
	}
	return s, keys
}

// BenchmarkTakeToken measures Take on existing token-bucket keys from one
// goroutine, cycling over 1K keys (cache-resident) and 1M keys (the maps,
// ~40MB, miss the caches as at 10M keys).
func BenchmarkTakeToken(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s, keys := benchKeys(b, n)
			mask := n - 1
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Take(keys[i&mask], benchLimit, t0, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTakeTokenEvictable is BenchmarkTakeToken for inline-limit keys
// (Evictable) in a capped store, which records each take's use.
func BenchmarkTakeTokenEvictable(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s := newStore(b, Config{MaxBytes: 1 << 40})
			keys := make([]uint64, n)
			x := uint64(n)
			for i := range keys {
				keys[i] = splitmix64(&x)
				if _, err := s.TakeAs(keys[i], benchLimit, t0, 1, Use{Kind: Evictable}); err != nil {
					b.Fatal(err)
				}
			}
			mask := n - 1
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// A new second now and then, so that the use is rewritten.
				if _, err := s.TakeAs(keys[i&mask], benchLimit, t0+int64(i)*ms, 1, Use{Kind: Evictable}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTakeTokenParallel is BenchmarkTakeToken from GOMAXPROCS
// goroutines; ns/op is wall time per take over all of them, so its ratio to
// BenchmarkTakeToken's is the parallel speedup. Each goroutine cycles over
// its own share of the keys (every P-th one), as independent clients do.
// The shared variant has every goroutine cycle over all the keys a little
// apart, so that the cache lines of each key and shard move between cores
// on almost every take: the worst case, a small set of hot keys.
//
// keys=1M is the representative case. With 1K keys each shard's map holds
// 0-2 keys, and the tiny maps' headers and groups of neighbouring shards
// share cache lines (the runtime packs them), so two cores writing
// interleaved shards false-share and scale poorly; at 10M keys (2,400 per
// shard) the group arrays are large and that effect vanishes in the cache
// misses.
func BenchmarkTakeTokenParallel(b *testing.B) {
	for _, tc := range []struct {
		n      int
		shared bool
	}{{1 << 10, false}, {1 << 20, false}, {1 << 10, true}} {
		name := fmt.Sprintf("keys=%d", tc.n)
		if tc.shared {
			name += "/shared"
		}
		b.Run(name, func(b *testing.B) {
			s, keys := benchKeys(b, tc.n)
			mask := tc.n - 1
			p := runtime.GOMAXPROCS(0)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := int(next.Add(1) - 1)
				i, step := g, p // every p-th key, from the g-th
				if tc.shared {
					i, step = g*(tc.n/7+1), 1
				}
				for pb.Next() {
					if _, err := s.Take(keys[i&mask], benchLimit, t0, 1); err != nil {
						b.Error(err)
						return
					}
					i += step
				}
			})
		})
	}
}

// BenchmarkStore10M inserts 10M distinct token-bucket keys into a default
// store and reports the memory they take, index included: heap-B/key from
// the Go heap (HeapInuse), rss-B/key from the process's resident set, both
// after a GC, and est-B/key, the store's own estimate (Stats.Bytes). Run it
// with -benchtime=1x. pinned: the keys of named policies (or any key of a
// store without a cap); evictable: inline-limit keys in a capped store,
// which also keeps their last use (evict.go).
func BenchmarkStore10M(b *testing.B) {
	b.Run("pinned", func(b *testing.B) { benchStore10M(b, DefaultConfig(), Pinned) })
	b.Run("evictable", func(b *testing.B) {
		benchStore10M(b, Config{Shards: DefaultShards, MaxBytes: 1 << 40}, Evictable)
	})
}

func benchStore10M(b *testing.B, cfg Config, kind Kind) {
	const n = 10_000_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		heap0, rss0 := memNow(b)
		b.StartTimer()
		s := newStore(b, cfg)
		x := uint64(i)
		for range n {
			if _, err := s.TakeAs(splitmix64(&x), benchLimit, t0, 1, Use{Kind: kind}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		heap1, rss1 := memNow(b)
		st := s.Stats()
		if st.Keys != n {
			b.Fatalf("Keys = %d, want %d (hash collision?)", st.Keys, n)
		}
		b.ReportMetric(float64(heap1-heap0)/n, "heap-B/key")
		b.ReportMetric(float64(rss1-rss0)/n, "rss-B/key")
		b.ReportMetric(float64(st.Bytes)/n, "est-B/key")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*(i+1)), "ns/insert")
		runtime.KeepAlive(s)
		s = nil
		b.StartTimer()
	}
}

// memNow collects garbage, returns freed memory to the OS and reports the
// heap in use and the resident set size, in bytes.
func memNow(b *testing.B) (heapInuse, rss int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Logf("no RSS: %v", err)
		return int64(ms.HeapInuse), 0
	}
	fields := bytes.Fields(statm)
	pages, err := strconv.ParseInt(string(fields[1]), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return int64(ms.HeapInuse), pages * int64(os.Getpagesize())
}
