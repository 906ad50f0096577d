package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
	// t0 is a fixed instant aligned to the hour (so windows start there).
	t0 = int64(472222*3600) * sec
)

// newStore returns a store with cfg or fails the test.
func newStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lim returns a limit of n units per period with algorithm a.
func lim(a bucket.Algorithm, n int64, period time.Duration) bucket.Limit {
	return bucket.Limit{Algorithm: a, Limit: n, Period: period}
}

// recount walks every map and returns the number of stored states and
// their estimated bytes, which the store's atomic counters must match.
func recount(s *Store) (keys, bytes int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		keys += int64(len(sh.tokens) + len(sh.fixed) + len(sh.sliding) + len(sh.hits) + len(sh.logs) + len(sh.leases))
		bytes += int64(len(sh.tokens))*tokenEntryBytes + int64(len(sh.fixed)+len(sh.sliding)+len(sh.hits))*windowEntryBytes
		for _, v := range sh.logs {
			bytes += logBytes(v.entries)
		}
		for _, v := range sh.leases {
			bytes += leaseBytes(v.Leases)
		}
		if s.meta != nil {
			for k := range s.meta[i] {
				if !hasAny(sh, k) {
					panic(fmt.Sprintf("evictable key %x tracked without a state", k))
				}
			}
			bytes += int64(len(s.meta[i])) * metaEntryBytes
		}
		sh.mu.Unlock()
	}
	return keys, bytes
}

// checkCounters fails the test if the atomic counters disagree with the maps.
func checkCounters(t testing.TB, s *Store) {
	t.Helper()
	keys, bytes := recount(s)
	st := s.Stats()
	if st.Keys != keys || st.Bytes != bytes {
		t.Fatalf("Stats() = {Keys:%d Bytes:%d}, maps hold %d keys of %d bytes", st.Keys, st.Bytes, keys, bytes)
	}
}

// splitmix64 is a fast PRNG step, used to make well-spread key hashes.
func splitmix64(x *uint64) uint64 {
	*x += 0x9E3779B97F4A7C15
	z := *x
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
