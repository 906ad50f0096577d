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

// BenchmarkWrite is one sync interval's write of 60,000 changed states
// (synced) into a file already holding 100,000: what the writer does each
// second under `sluice bench --workers 32 --keys 100000` at some 100,000
// checks/s; ns/op is per write.
func BenchmarkWrite(b *testing.B) {
	const batch = 60_000
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
		if err := db.Write(tokens(uint64(i*batch%100_000), batch), now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/batch, "ns/state")
}

// BenchmarkLoad writes SLUICE_PERSIST_KEYS (default 100,000) token-bucket
// states, in writes of at most DefaultMaxPending (the most a node's writer
// writes at once), then reports the file's bytes per key and the time of
// a node's start: every state read, decoded and imported into a store
// (load-s; decode-s is reading and decoding alone, a pass of its own).
//
//	SLUICE_PERSIST_KEYS=10000000 go test -run X -bench Load -benchtime 1x -timeout 60m ./internal/persist/
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
	for i := 0; i < keys; i += persist.DefaultMaxPending {
		if err := db.Write(tokens(uint64(i), min(persist.DefaultMaxPending, keys-i)), now); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("wrote %d keys in %s", keys, time.Since(start))
	fi, err := os.Stat(filepath.Join(dir, persist.FileName))
	if err != nil {
		b.Fatal(err)
	}
	var decode, load time.Duration
	b.ResetTimer()
	for range b.N {
		st, err := store.New(store.Config{})
		if err != nil {
			b.Fatal(err)
		}
		n, imported := 0, 0
		t0 := time.Now()
		if _, err := db.Load(now, func(store.Entry) { n++ }); err != nil || n != keys {
			b.Fatalf("decoded %d (%v), want %d", n, err, keys)
		}
		t1 := time.Now()
		decode += t1.Sub(t0)
		if _, err := db.Load(now, func(e store.Entry) {
			if st.Import(e, now) == nil {
				imported++
			}
		}); err != nil || imported != keys {
			b.Fatalf("imported %d (%v), want %d", imported, err, keys)
		}
		load += time.Since(t1)
	}
	b.ReportMetric(float64(fi.Size())/float64(keys), "bytes/key")
	b.ReportMetric(decode.Seconds()/float64(b.N), "decode-s")
	b.ReportMetric(load.Seconds()/float64(b.N), "load-s")
}
