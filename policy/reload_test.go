package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func policyFile(limit int) string {
	return fmt.Sprintf("policies:\n  api:\n    limit: %d\n    period: 1m\n", limit)
}

func writePolicies(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// recorder collects what a Reloader applies and rejects.
type recorder struct {
	mu       sync.Mutex
	applied  []*Set
	rejected []error
}

func (r *recorder) apply(s *Set) { r.mu.Lock(); r.applied = append(r.applied, s); r.mu.Unlock() }
func (r *recorder) reject(err error) {
	r.mu.Lock()
	r.rejected = append(r.rejected, err)
	r.mu.Unlock()
}

func (r *recorder) counts() (applied, rejected int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.applied), len(r.rejected)
}

// waitFor polls cond until it holds or a deadline of a second and a half
// (a valid change must be applied within a second) passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(1500 * time.Millisecond)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func limitOf(t *testing.T, s *Set) int64 {
	t.Helper()
	p, ok := s.Lookup("api")
	if !ok {
		t.Fatalf("no policy api in %v", s.Names())
	}
	return p.Limit.Limit
}

// startReloader builds a Reloader on path and runs it until the test ends.
func startReloader(t *testing.T, path string) (*Reloader, *recorder) {
	t.Helper()
	rec := &recorder{}
	r, err := NewReloader(ReloaderConfig{Path: path, Apply: rec.apply, Rejected: rec.reject,
		Debounce: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, rec
}

// TestReloaderWatch: a rewrite is applied within a second; an invalid
// rewrite keeps the set in force and is rejected once; a rewrite with the
// same policies (a comment) applies nothing; a fixed file is applied.
func TestReloaderWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writePolicies(t, path, policyFile(10))
	r, rec := startReloader(t, path)
	if got := limitOf(t, r.Set()); got != 10 {
		t.Fatalf("initial limit %d, want 10", got)
	}

	writePolicies(t, path, policyFile(20))
	waitFor(t, "limit 20", func() bool { return limitOf(t, r.Set()) == 20 })

	writePolicies(t, path, "policies:\n  api:\n    limit: -1\n    period: 1m\n")
	waitFor(t, "a rejection", func() bool { _, n := rec.counts(); return n == 1 })
	if got := limitOf(t, r.Set()); got != 20 {
		t.Fatalf("limit %d after an invalid rewrite, want 20 (the last good one)", got)
	}
	if err := r.Reload(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Reload of the invalid file: %v, want ErrInvalid", err)
	}
	if _, n := rec.counts(); n != 1 {
		t.Fatalf("%d rejections, want 1: an unchanged invalid file is rejected once", n)
	}

	writePolicies(t, path, "# same policies\n"+policyFile(20))
	writePolicies(t, path, policyFile(30))
	waitFor(t, "limit 30", func() bool { return limitOf(t, r.Set()) == 30 })
	if a, _ := rec.counts(); a != 2 {
		t.Fatalf("%d sets applied, want 2 (20 and 30)", a)
	}
}

// TestReloaderNoOp: a rewrite that changes only comments applies nothing.
func TestReloaderNoOp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writePolicies(t, path, policyFile(10))
	rec := &recorder{}
	r, err := NewReloader(ReloaderConfig{Path: path, Apply: rec.apply, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	writePolicies(t, path, "# a comment\n"+policyFile(10))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if a, _ := rec.counts(); a != 0 {
		t.Fatalf("%d sets applied for a comment, want 0", a)
	}
}

// TestReloaderConfigMap: the file mounted from a ConfigMap (a symlink
// through "..data" to a timestamped directory) follows a "..data" swap,
// keeps the last good set when the swapped-in file is invalid, and
// follows the next valid swap.
func TestReloaderConfigMap(t *testing.T) {
	dir := t.TempDir()
	gen := 0
	swap := func(data string) {
		t.Helper()
		gen++
		ts := fmt.Sprintf("..2026_12_04_20_00_%02d.%d", gen, gen)
		if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
			t.Fatal(err)
		}
		writePolicies(t, filepath.Join(dir, ts, "policies.yaml"), data)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(ts, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		if gen > 1 { // the kubelet removes the old directory
			old := fmt.Sprintf("..2026_12_04_20_00_%02d.%d", gen-1, gen-1)
			if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
				t.Fatal(err)
			}
		}
	}
	swap(policyFile(10))
	path := filepath.Join(dir, "policies.yaml")
	if err := os.Symlink(filepath.Join("..data", "policies.yaml"), path); err != nil {
		t.Fatal(err)
	}
	r, rec := startReloader(t, path)

	swap(policyFile(20))
	waitFor(t, "limit 20", func() bool { return limitOf(t, r.Set()) == 20 })
	swap("policies: [not a map")
	waitFor(t, "a rejection", func() bool { _, n := rec.counts(); return n == 1 })
	if got := limitOf(t, r.Set()); got != 20 {
		t.Fatalf("limit %d after an invalid swap, want 20", got)
	}
	swap(policyFile(30))
	waitFor(t, "limit 30", func() bool { return limitOf(t, r.Set()) == 30 })
}

func TestNewReloaderErrors(t *testing.T) {
	apply := func(*Set) {}
	for _, cfg := range []ReloaderConfig{{Apply: apply}, {Path: "x"}, {Path: "x", Apply: apply, Debounce: -1}} {
		if _, err := NewReloader(cfg); !errors.Is(err, ErrInvalidReloader) {
			t.Errorf("NewReloader(%+v): %v, want ErrInvalidReloader", cfg, err)
		}
	}
	path := filepath.Join(t.TempDir(), "p.yaml")
	writePolicies(t, path, "policies: 5")
	if _, err := NewReloader(ReloaderConfig{Path: path, Apply: apply}); !errors.Is(err, ErrInvalid) {
		t.Errorf("NewReloader of an invalid file: %v, want ErrInvalid", err)
	}
}

// TestHash: the hash is of what the policies decide, not of the file.
func TestHash(t *testing.T) {
	parse := func(src string) string {
		t.Helper()
		s, err := Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return s.Hash()
	}
	base := parse("policies:\n  a: {limit: 10, period: 1m}\n  b: {algorithm: concurrency, limit: 3}\n")
	if len(base) != HashLen {
		t.Fatalf("hash %q: %d characters, want %d", base, len(base), HashLen)
	}
	same := []string{
		"# comment\npolicies:\n  b: {algorithm: concurrency, limit: 3}\n  a: {limit: 10, period: 60s}\n",
		"policies:\n  a: {limit: 10, period: 1m, burst: 10}\n  b: {algorithm: concurrency, limit: 3}\n",
		"allow_inline: true\npolicies:\n  a: {limit: 10, period: 1m, failure_mode: local, grants: auto}\n  b: {algorithm: concurrency, limit: 3}\n",
	}
	for _, src := range same {
		if h := parse(src); h != base {
			t.Errorf("hash %s, want %s for %q", h, base, src)
		}
	}
	differ := []string{
		"policies:\n  a: {limit: 11, period: 1m}\n  b: {algorithm: concurrency, limit: 3}\n",
		"policies:\n  a: {limit: 10, period: 2m}\n  b: {algorithm: concurrency, limit: 3}\n",
		"policies:\n  a: {limit: 10, period: 1m, burst: 20}\n  b: {algorithm: concurrency, limit: 3}\n",
		"policies:\n  a: {limit: 10, period: 1m, failure_mode: deny}\n  b: {algorithm: concurrency, limit: 3}\n",
		"policies:\n  a: {limit: 10, period: 1m, grants: never}\n  b: {algorithm: concurrency, limit: 3}\n",
		"policies:\n  a: {algorithm: fixed_window, limit: 10, period: 1m}\n  b: {algorithm: concurrency, limit: 3}\n",
		"policies:\n  c: {limit: 10, period: 1m}\n  b: {algorithm: concurrency, limit: 3}\n",
		"allow_inline: false\npolicies:\n  a: {limit: 10, period: 1m}\n  b: {algorithm: concurrency, limit: 3}\n",
		"policies:\n  a: {limit: 10, period: 1m}\n",
	}
	seen := map[string]string{base: "base"}
	for _, src := range differ {
		h := parse(src)
		if prev, dup := seen[h]; dup {
			t.Errorf("hash %s of %q equals that of %q", h, src, prev)
		}
		seen[h] = src
	}
	if Empty().Hash() != parse("") {
		t.Error("an empty file hashes unlike Empty()")
	}
}

// TestReloaderEmptyFile: the watch takes an empty file for a write in
// progress and applies nothing; the next write is applied; Reload (SIGHUP)
// applies an empty file as the set of no policies it is.
func TestReloaderEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writePolicies(t, path, policyFile(10))
	r, rec := startReloader(t, path)
	writePolicies(t, path, "")
	writePolicies(t, path, policyFile(40))
	waitFor(t, "limit 40", func() bool { return limitOf(t, r.Set()) == 40 })
	writePolicies(t, path, "")
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := r.Set().Len(); n != 0 {
		t.Fatalf("%d policies after Reload of an empty file, want 0", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, s := range rec.applied[:len(rec.applied)-1] {
		if s.Len() == 0 {
			t.Fatalf("applied set %d of %d is empty: the watch applied a write in progress", i, len(rec.applied))
		}
	}
}
