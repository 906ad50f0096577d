package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run starts a Watcher on path and returns the count of Changed calls.
func run(t *testing.T, path string) *atomic.Int64 {
	t.Helper()
	var calls atomic.Int64
	w, err := New(Config{Path: path, Changed: func() { calls.Add(1) }, Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitCalls(t, &calls, 1) // the first call: the watches are in place
	return &calls
}

// waitCalls waits until calls reaches at least n.
func waitCalls(t *testing.T, calls *atomic.Int64, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("Changed called %d times, want >= %d", calls.Load(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFileRewriteAndRename: a file written in place, or replaced by a
// rename over it, is a change.
func TestFileRewriteAndRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	writeFile(t, path, "a")
	calls := run(t, path)
	writeFile(t, path, "b")
	waitCalls(t, calls, 2)
	n := calls.Load()
	tmp := filepath.Join(dir, ".p.yaml.tmp")
	writeFile(t, tmp, "c")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, calls, n+1)
}

// TestConfigMapSwap: a file reached through a ConfigMap's "..data" symlink
// changes when "..data" is swapped to a new directory.
func TestConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	swap := func(gen, data string) {
		ts := filepath.Join(dir, "..2026_"+gen)
		if err := os.Mkdir(ts, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(ts, "p.yaml"), data)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap("1", "a")
	path := filepath.Join(dir, "p.yaml")
	if err := os.Symlink(filepath.Join("..data", "p.yaml"), path); err != nil {
		t.Fatal(err)
	}
	calls := run(t, path)
	swap("2", "b")
	waitCalls(t, calls, 2)
	n := calls.Load()
	writeFile(t, filepath.Join(dir, "..data", "p.yaml"), "c") // the file behind the links, in place
	waitCalls(t, calls, n+1)
}

// TestDirectorySubdirectory: a file created in a subdirectory made after
// the watch started is a change (the watches follow new directories).
func TestDirectorySubdirectory(t *testing.T) {
	dir := t.TempDir()
	calls := run(t, dir)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, calls, 2)
	n := calls.Load()
	writeFile(t, filepath.Join(dir, "sub", "x.yaml"), "a")
	waitCalls(t, calls, n+1)
}

func TestNewInvalid(t *testing.T) {
	for _, cfg := range []Config{
		{Changed: func() {}},
		{Path: "x"},
		{Path: "x", Changed: func() {}, Debounce: -1},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
}
