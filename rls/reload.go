package rls

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ErrInvalidReloader wraps the errors of NewReloader about its config.
var ErrInvalidReloader = errors.New("rls: invalid reloader config")

// DefaultDebounce is how long a Reloader waits after the last change it
// saw before it reloads: a burst of changes (an editor's save, a ConfigMap
// update's rename dance) reloads once.
const DefaultDebounce = 100 * time.Millisecond

// ReloaderConfig configures a Reloader.
type ReloaderConfig struct {
	// Path is the file or directory to load and watch (see Load). Required.
	Path string
	// Options are passed to Load.
	Options Options
	// Apply receives every new valid configuration, the first one from
	// NewReloader. It is called one call at a time, with the Reloader's
	// lock held: it must not call the Reloader. Required.
	Apply func(*Config)
	// Rejected, if not nil, receives the error of every load that failed;
	// the configuration in force stays. (For metrics; the Reloader logs.)
	Rejected func(error)
	// Debounce is the quiet time after a change before a reload; 0 means
	// DefaultDebounce. Must not be negative.
	Debounce time.Duration
	// Logger receives reloads and rejections; nil means slog.Default().
	Logger *slog.Logger
}

// Reloader keeps a configuration loaded from a path up to date: Run
// watches the path's directory (so that an atomic rename, a symlink swap
// of the path itself, or a Kubernetes ConfigMap's "..data" swap is seen)
// and reloads shortly after a change; Reload reloads on demand (the node
// calls it on SIGHUP). A load that fails keeps the configuration in force.
// A load of unchanged files (same names and contents) applies nothing.
type Reloader struct {
	cfg  ReloaderConfig
	log  *slog.Logger
	mu   sync.Mutex // serializes loads and Apply calls
	cur  *Config
	kick chan struct{} // buffer 1: Run should resync its watches
}

// NewReloader loads the configuration at cfg.Path and applies it. An
// invalid configuration is an error: there is no last good one to keep.
func NewReloader(cfg ReloaderConfig) (*Reloader, error) {
	switch {
	case cfg.Path == "":
		return nil, fmt.Errorf("%w: Path: must not be empty", ErrInvalidReloader)
	case cfg.Apply == nil:
		return nil, fmt.Errorf("%w: Apply: is required", ErrInvalidReloader)
	case cfg.Debounce < 0:
		return nil, fmt.Errorf("%w: Debounce: must be >= 0, got %v", ErrInvalidReloader, cfg.Debounce)
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = DefaultDebounce
	}
	r := &Reloader{cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1)}
	if r.log == nil {
		r.log = slog.Default()
	}
	c, err := Load(cfg.Path, cfg.Options)
	if err != nil {
		return nil, err
	}
	r.cur = c
	r.logWarnings(c)
	cfg.Apply(c)
	return r, nil
}

// Config returns the configuration in force.
func (r *Reloader) Config() *Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Reload loads the configuration again and applies it if it is valid and
// differs from the one in force. An invalid one is returned as the error
// (and passed to Rejected); the configuration in force stays.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		select {
		case r.kick <- struct{}{}: // directories may have come or gone
		default:
		}
	}()
	c, err := Load(r.cfg.Path, r.cfg.Options)
	if err != nil {
		r.log.Error("rls: config rejected; keeping the one in force", "path", r.cfg.Path, "err", err)
		if r.cfg.Rejected != nil {
			r.cfg.Rejected(err)
		}
		return err
	}
	if c.Digest == r.cur.Digest {
		r.log.Debug("rls: config unchanged", "path", r.cfg.Path)
		return nil
	}
	r.cur = c
	r.logWarnings(c)
	r.cfg.Apply(c)
	r.log.Info("rls: config reloaded", "path", r.cfg.Path, "files", len(c.Files), "domains", len(c.domains))
	return nil
}

func (r *Reloader) logWarnings(c *Config) {
	for _, w := range c.Warnings {
		r.log.Warn("rls: config", "warning", w)
	}
}

// Run watches the path until ctx is done, reloading after changes. If the
// file system cannot be watched it logs why and returns only when ctx is
// done (Reload still works). It returns nil.
func (r *Reloader) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		r.log.Error("rls: cannot watch the config; it reloads on SIGHUP only", "path", r.cfg.Path, "err", err)
		<-ctx.Done()
		return nil
	}
	defer w.Close()
	r.syncWatches(w)
	// A change between NewReloader's load and the watches is seen now.
	_ = r.Reload()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			r.log.Debug("rls: config path changed", "event", ev.String())
			timer.Reset(r.cfg.Debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.log.Warn("rls: watching the config", "path", r.cfg.Path, "err", err)
		case <-timer.C:
			_ = r.Reload() // logged and counted by Reload
		case <-r.kick:
			r.syncWatches(w)
		}
	}
}

// syncWatches watches the path's parent, the path if it is a directory and
// its visible subdirectories, and stops watching directories that are
// gone. Adding a watched path again re-resolves it, which follows a
// symlink that was swapped.
func (r *Reloader) syncWatches(w *fsnotify.Watcher) {
	want := map[string]bool{filepath.Dir(filepath.Clean(r.cfg.Path)): true}
	if st, err := os.Stat(r.cfg.Path); err == nil && st.IsDir() {
		root := filepath.Clean(r.cfg.Path)
		want[root] = true
		if real, err := filepath.EvalSymlinks(root); err == nil {
			root = real // subdirectories of the directory it names
		}
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == root {
				return nil
			}
			if skip, err := skipDotfile(d); skip {
				return err
			}
			if d.IsDir() {
				want[p] = true
			}
			return nil
		})
	}
	for _, p := range w.WatchList() {
		if !want[p] {
			_ = w.Remove(p)
		}
	}
	for p := range want {
		if err := w.Add(p); err != nil {
			r.log.Warn("rls: cannot watch", "dir", p, "err", err)
		}
	}
}
