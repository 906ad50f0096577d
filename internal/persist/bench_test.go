package persist_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/persist"
	"github.com/sluice-rl/sluice/store"
)

// tokens returns n token-bucket states of keys from first, live at now.
func tokens(first uint64, n int) []store.Entry {
	es := make([]store.Entry, n)
	for i := range es {
		k := (first + uint64(i)) * 0x9E3779B97F4A7C15 // spread like key hashes
		es[i] = store.Entry{Key: k, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: now + 3600e9}}
	}
	return es
}

// BenchmarkWrite is one interval's batch of 1,000 changed states written
// (synced) into a file already holding 100,000: the writer's cost per
// round; ns/op is per batch.
func BenchmarkWrite(b *testing.B) {
	db, err := persist.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 100_000; i += 10_000 {
		if err := db.Write(tokens(uint64(i), 10_000), now); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := db.Write(tokens(uint64(i*1000%100_000), 1000), now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/state")
}

// BenchmarkLoad writes SLUICE_PERSIST_KEYS (default 100,000) token-bucket
// states, then reports the file's bytes per key and the time to load
// them all (ns/op is one whole load).
func BenchmarkLoad(b *testing.B) {
	keys := 100_000
	if s := os.Getenv("SLUICE_PERSIST_KEYS"); s != "" {
		var err error
		if keys, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	db, err := persist.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	for i := 0; i < keys; i += 10_000 {
		if err := db.Write(tokens(uint64(i), min(10_000, keys-i)), now); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("wrote %d keys in %s", keys, time.Since(start))
	fi, err := os.Stat(filepath.Join(dir, persist.FileName))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		n := 0
		if _, err := db.Load(now, func(store.Entry) { n++ }); err != nil || n != keys {
			b.Fatalf("loaded %d (%v), want %d", n, err, keys)
		}
	}
	b.ReportMetric(float64(fi.Size())/float64(keys), "bytes/key")
}
