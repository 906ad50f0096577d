package rls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func domainFile(domain string, rpu int) string {
	return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: %d}\n", domain, rpu)
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// configMap lays out dir as the kubelet mounts a ConfigMap: the files in a
// timestamped directory, "..data" a symlink to it, and each visible file a
// symlink through "..data". update swaps in a new timestamped directory
// by renaming a fresh symlink over "..data", as the kubelet does.
type configMap struct {
	t   *testing.T
	dir string
	gen int
}

func (cm *configMap) update(files map[string]string) {
	cm.t.Helper()
	cm.gen++
	ts := fmt.Sprintf("..2026_03_01_12_00_%02d.%d", cm.gen, cm.gen)
	for name, data := range files {
		write(cm.t, filepath.Join(cm.dir, ts, name), data)
	}
	tmp := filepath.Join(cm.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		cm.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(cm.dir, "..data")); err != nil {
		cm.t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(cm.dir, name)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				cm.t.Fatal(err)
			}
		}
	}
}

// TestLoadDirectory: a directory loads each visible file once, whatever
// its extension, subdirectories included; dot-entries (a ConfigMap's
// "..data" and timestamped directory, editor swap files) are skipped.
func TestLoadDirectory(t *testing.T) {
	dir := t.TempDir()
	cm := &configMap{t: t, dir: dir}
	cm.update(map[string]string{"a.yaml": domainFile("a", 1), "b.conf": domainFile("b", 2)})
	write(t, filepath.Join(dir, "sub", "c.yaml"), domainFile("c", 3))
	write(t, filepath.Join(dir, ".hidden.yaml"), "not: [valid")
	write(t, filepath.Join(dir, ".git", "x.yaml"), "not: [valid")
	if err := os.Symlink(filepath.Join(dir, "sub"), filepath.Join(dir, "sublink")); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(c.Domains()); got != "[a b c]" {
		t.Errorf("domains %s, want [a b c]", got)
	}
	if len(c.Files) != 3 {
		t.Errorf("files %q, want 3", c.Files)
	}
	// A single file loads alone.
	c, err = Load(filepath.Join(dir, "sub", "c.yaml"), Options{})
	if err != nil || fmt.Sprint(c.Domains()) != "[c]" {
		t.Errorf("single file: %v %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "missing"), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: %v", err)
	}
	// An invalid file names itself.
	write(t, filepath.Join(dir, "sub", "bad.yaml"), "domain: x\ndescriptors:\n  - key: k\n    rate_limit: {unit: often}\n")
	if _, err := Load(dir, Options{}); err == nil || !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("invalid file in the directory: %v", err)
	} else if want := filepath.Join(dir, "sub", "bad.yaml") + ":4:"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %s", err, want)
	}
}

// reloadHarness runs a Reloader on path and records what it applies.
type reloadHarness struct {
	r        *Reloader
	mu       sync.Mutex
	applied  []*Config
	rejected atomic.Int64
	cancel   context.CancelFunc
	done     chan struct{}
}

func startReloader(t *testing.T, path string) *reloadHarness {
	t.Helper()
	h := &reloadHarness{done: make(chan struct{})}
	r, err := NewReloader(ReloaderConfig{
		Path:     path,
		Apply:    func(c *Config) { h.mu.Lock(); h.applied = append(h.applied, c); h.mu.Unlock() },
		Rejected: func(error) { h.rejected.Add(1) },
		Debounce: 20 * time.Millisecond,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { defer close(h.done); _ = r.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *reloadHarness) stop() {
	h.cancel()
	<-h.done
}

// rpu is the limit of key k in domain d in the latest applied config.
func (h *reloadHarness) rpu(domain string) uint32 {
	h.mu.Lock()
	c := h.applied[len(h.applied)-1]
	h.mu.Unlock()
	m, _ := Lookup(c, domain, []KV{{"k", "v"}})
	if m.Rule == nil {
		return 0
	}
	return m.Rule.RequestsPerUnit
}

// await polls cond until it holds or a second passes (the reload deadline).
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within a second: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReloadFile: a rewritten file is applied within a second; an invalid
// rewrite is rejected (counted) and the last good config stays; Reload
// reloads on demand; an unchanged file applies nothing.
func TestReloadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write(t, path, domainFile("d", 1))
	h := startReloader(t, path)
	if h.rpu("d") != 1 {
		t.Fatalf("initial rpu %d", h.rpu("d"))
	}
	write(t, path, domainFile("d", 2))
	await(t, "the rewrite applied", func() bool { return h.rpu("d") == 2 })

	write(t, path, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: never}\n")
	await(t, "the invalid file rejected", func() bool { return h.rejected.Load() >= 1 })
	if h.rpu("d") != 2 || h.r.Config().Digest != h.applied[len(h.applied)-1].Digest {
		t.Fatalf("the last good config was not kept: rpu %d", h.rpu("d"))
	}

	// An atomic replace (write elsewhere, rename over): the editor's way.
	tmp := filepath.Join(dir, ".config.yaml.tmp")
	write(t, tmp, domainFile("d", 3))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	await(t, "the renamed file applied", func() bool { return h.rpu("d") == 3 })

	h.mu.Lock()
	n := len(h.applied)
	h.mu.Unlock()
	if err := h.r.Reload(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	if len(h.applied) != n {
		t.Errorf("Reload of unchanged files applied a config")
	}
	h.mu.Unlock()
}

// TestReloadConfigMap: a Kubernetes ConfigMap update (a new timestamped
// directory and the "..data" symlink swapped to it) is applied within a
// second, and a file added to the ConfigMap too.
func TestReloadConfigMap(t *testing.T) {
	dir := t.TempDir()
	cm := &configMap{t: t, dir: dir}
	cm.update(map[string]string{"d.yaml": domainFile("d", 1)})
	h := startReloader(t, dir)
	if h.rpu("d") != 1 {
		t.Fatalf("initial rpu %d", h.rpu("d"))
	}
	cm.update(map[string]string{"d.yaml": domainFile("d", 5)})
	await(t, "the ..data swap applied", func() bool { return h.rpu("d") == 5 })
	cm.update(map[string]string{"d.yaml": domainFile("d", 5), "e.yaml": domainFile("e", 7)})
	await(t, "the added file applied", func() bool { return h.rpu("e") == 7 })
	// A bad update keeps the last good config.
	cm.update(map[string]string{"d.yaml": "domain: d\nbogus: 1\n", "e.yaml": domainFile("e", 7)})
	await(t, "the bad update rejected", func() bool { return h.rejected.Load() >= 1 })
	if h.rpu("d") != 5 {
		t.Errorf("rpu %d after a bad update, want the last good 5", h.rpu("d"))
	}
}

// TestReloadSymlinkedRoot: a path that is itself a symlink to a directory
// (the reference's RUNTIME_ROOT swap) is followed when it is swapped.
func TestReloadSymlinkedRoot(t *testing.T) {
	base := t.TempDir()
	write(t, filepath.Join(base, "v1", "d.yaml"), domainFile("d", 1))
	write(t, filepath.Join(base, "v2", "d.yaml"), domainFile("d", 2))
	root := filepath.Join(base, "current")
	if err := os.Symlink(filepath.Join(base, "v1"), root); err != nil {
		t.Fatal(err)
	}
	h := startReloader(t, root)
	if h.rpu("d") != 1 {
		t.Fatalf("initial rpu %d", h.rpu("d"))
	}
	tmp := filepath.Join(base, "current.tmp")
	if err := os.Symlink(filepath.Join(base, "v2"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, root); err != nil {
		t.Fatal(err)
	}
	await(t, "the swapped root applied", func() bool { return h.rpu("d") == 2 })
	// And files of the new target are watched.
	write(t, filepath.Join(base, "v2", "d.yaml"), domainFile("d", 9))
	await(t, "a write in the new target applied", func() bool { return h.rpu("d") == 9 })
}

func TestNewReloaderErrors(t *testing.T) {
	apply := func(*Config) {}
	for _, cfg := range []ReloaderConfig{
		{Apply: apply},
		{Path: "x"},
		{Path: "x", Apply: apply, Debounce: -1},
	} {
		if _, err := NewReloader(cfg); !errors.Is(err, ErrInvalidReloader) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "bad.yaml"), "domain: [\n")
	if _, err := NewReloader(ReloaderConfig{Path: dir, Apply: apply}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("initial invalid config: %v", err)
	}
}
