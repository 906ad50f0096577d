package rls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/internal/watch"
)

// ErrInvalidReloader wraps the errors of NewReloader about its config.
var ErrInvalidReloader = errors.New("rls: invalid reloader config")

// DefaultDebounce is how long a Reloader waits after the last change it
// saw before it reloads: a burst of changes (an editor's save, a ConfigMap
// update's rename dance) reloads once.
const DefaultDebounce = watch.DefaultDebounce

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
	cfg   ReloaderConfig
	log   *slog.Logger
	mu    sync.Mutex // serializes loads and Apply calls
	cur   *Config
	watch *watch.Watcher
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
	r := &Reloader{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	w, err := watch.New(watch.Config{Path: cfg.Path, Changed: func() { _ = r.Reload() }, // logged and counted by Reload
		Debounce: cfg.Debounce, What: "rls: config", Logger: r.log})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReloader, err)
	}
	r.watch = w
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
	defer r.watch.Resync() // directories may have come or gone
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

// Run watches the path until ctx is done, reloading after changes (see
// package internal/watch). If the file system cannot be watched it logs
// why and returns only when ctx is done (Reload still works). It returns
// nil.
func (r *Reloader) Run(ctx context.Context) error {
	return r.watch.Run(ctx)
}
