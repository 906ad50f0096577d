package policy

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/internal/watch"
)

// ErrInvalidReloader wraps the errors of NewReloader about its config.
var ErrInvalidReloader = errors.New("policy: invalid reloader config")

// ReloaderConfig configures a Reloader.
type ReloaderConfig struct {
	// Path is the policy file. Required.
	Path string
	// Apply receives every new valid set after the first (which
	// NewReloader loads and Set returns). It is called one call at a
	// time, with the Reloader's lock held: it must not call the Reloader.
	// Required.
	Apply func(*Set)
	// Rejected, if not nil, receives the error of every load that failed;
	// the set in force stays. (For metrics; the Reloader logs.)
	Rejected func(error)
	// Debounce is the quiet time after a change before a reload; 0 means
	// watch.DefaultDebounce (100 ms). Must not be negative.
	Debounce time.Duration
	// Logger receives reloads and rejections; nil means slog.Default().
	Logger *slog.Logger
}

// Reloader keeps a policy set loaded from a file up to date: Run watches
// the file's directory (so that an editor's rename, a symlink swap or a
// Kubernetes ConfigMap's "..data" swap is seen) and reloads shortly after
// a change; Reload reloads on demand (the node calls it on SIGHUP). A
// file whose bytes did not change is not parsed again; a valid file whose
// set has the same Hash applies nothing; an invalid one keeps the set in
// force, and is logged and rejected once for each content. The watch
// takes an empty file for a write in progress and leaves it to the next
// change; Reload applies it (a set of no policies).
type Reloader struct {
	cfg   ReloaderConfig
	log   *slog.Logger
	watch *watch.Watcher
	mu    sync.Mutex // serializes loads and Apply calls
	cur   *Set
	seen  [sha256.Size]byte // the content last read, valid or not
	known bool              // seen holds a content
	bad   error             // why seen is invalid; nil if it is valid
}

// NewReloader loads the policy file at cfg.Path. An invalid file is an
// error: there is no last good set to keep.
func NewReloader(cfg ReloaderConfig) (*Reloader, error) {
	switch {
	case cfg.Path == "":
		return nil, fmt.Errorf("%w: Path: must not be empty", ErrInvalidReloader)
	case cfg.Apply == nil:
		return nil, fmt.Errorf("%w: Apply: is required", ErrInvalidReloader)
	}
	r := &Reloader{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	w, err := watch.New(watch.Config{Path: cfg.Path, Changed: func() { _ = r.reload(true) }, // logged and counted by reload
		Debounce: cfg.Debounce, What: "policy file", Logger: r.log})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidReloader, err)
	}
	r.watch = w
	data, err := os.ReadFile(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if r.cur, err = Parse(data); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Path, err)
	}
	r.seen, r.known = sha256.Sum256(data), true
	return r, nil
}

// Set returns the set in force.
func (r *Reloader) Set() *Set {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// Reload reads the file again and applies its set if it is valid and
// differs from the one in force. An invalid file is returned as the error
// (logged and passed to Rejected the first time its content is seen); the
// set in force stays.
func (r *Reloader) Reload() error { return r.reload(false) }

// reload is Reload; watched says the watch asks, and then an empty file
// is taken for a write in progress (truncated, not yet written: an
// editor's or a shell's in-place save), not for a set of no policies, and
// waits for the next change (or a SIGHUP, which applies it).
func (r *Reloader) reload(watched bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.watch.Resync() // the file's directory may have been replaced
	data, err := os.ReadFile(r.cfg.Path)
	if err != nil {
		r.known = false // whatever comes next is new
		return r.reject(fmt.Errorf("policy: %w", err))
	}
	if watched && len(data) == 0 {
		r.log.Debug("policy file empty; waiting for the write to finish", "file", r.cfg.Path)
		return nil
	}
	sum := sha256.Sum256(data)
	if r.known && sum == r.seen {
		if r.bad != nil && !watched { // asked for: said again, not counted again
			r.log.Error("policy reload failed; keeping the old policies", "file", r.cfg.Path, "err", r.bad)
		}
		return r.bad // counted when first seen
	}
	r.seen, r.known = sum, true
	set, err := Parse(data)
	if err != nil {
		r.bad = r.reject(fmt.Errorf("%s: %w", r.cfg.Path, err))
		return r.bad
	}
	r.bad = nil
	if set.Hash() == r.cur.Hash() {
		r.log.Debug("policy file rewritten; policies unchanged", "file", r.cfg.Path)
		return nil
	}
	r.cur = set
	r.cfg.Apply(set)
	r.log.Info("policies reloaded", "file", r.cfg.Path, "policies", set.Len(), "hash", set.Hash())
	return nil
}

func (r *Reloader) reject(err error) error {
	r.log.Error("policy reload failed; keeping the old policies", "file", r.cfg.Path, "err", err)
	if r.cfg.Rejected != nil {
		r.cfg.Rejected(err)
	}
	return err
}

// Run watches the file until ctx is done, reloading after changes. If the
// file system cannot be watched it logs why and returns only when ctx is
// done (Reload still works). It returns nil.
func (r *Reloader) Run(ctx context.Context) error {
	return r.watch.Run(ctx)
}
