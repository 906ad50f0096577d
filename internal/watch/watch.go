// Package watch tells when a file or a directory of files changes, as
// Kubernetes changes a mounted ConfigMap included. A Watcher watches the
// path's parent directory, not the path (so that an atomic rename over the
// path, a swap of a symlink at the path, or a ConfigMap's "..data" swap is
// seen), the directory of the file a symlink at the path names, and, when
// the path is a directory, the path and its visible subdirectories; after a burst of events and a quiet time it calls
// Changed, which re-reads the files and decides (by their contents)
// whether anything changed. It imports nothing of Sluice; package rls's
// Reloader and package policy's Reloader run on it.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// ErrInvalid wraps the errors of New about its config.
var ErrInvalid = errors.New("watch: invalid config")

// DefaultDebounce is how long a Watcher waits after the last event it saw
// before it calls Changed: a burst of events (an editor's save, a
// ConfigMap update's rename dance) makes one call.
const DefaultDebounce = 100 * time.Millisecond

// Config configures a Watcher.
type Config struct {
	// Path is the file or directory to watch. Required.
	Path string
	// Changed is called on Run's goroutine once, Debounce after the
	// watches are in place (a change made before then is seen by that
	// call), and then after every burst of events, Debounce after its
	// last one. Required.
	Changed func()
	// Debounce is the quiet time after an event before Changed is
	// called; 0 means DefaultDebounce. Must not be negative.
	Debounce time.Duration
	// What names the watched thing in log lines, e.g. "rls: config".
	What string
	// Logger receives watch problems; nil means slog.Default().
	Logger *slog.Logger
}

// Watcher watches one path; see the package doc.
type Watcher struct {
	cfg  Config
	log  *slog.Logger
	kick chan struct{} // buffer 1: Run should resync its watches
}

// New checks cfg and returns a Watcher; Run starts it.
func New(cfg Config) (*Watcher, error) {
	switch {
	case cfg.Path == "":
		return nil, fmt.Errorf("%w: Path: must not be empty", ErrInvalid)
	case cfg.Changed == nil:
		return nil, fmt.Errorf("%w: Changed: is required", ErrInvalid)
	case cfg.Debounce < 0:
		return nil, fmt.Errorf("%w: Debounce: must be >= 0, got %v", ErrInvalid, cfg.Debounce)
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.What == "" {
		cfg.What = "watch"
	}
	w := &Watcher{cfg: cfg, log: cfg.Logger, kick: make(chan struct{}, 1)}
	if w.log == nil {
		w.log = slog.Default()
	}
	return w, nil
}

// Resync asks Run to re-read which directories exist and to watch them
// (after a reload: directories may have come or gone, a symlink may name
// another one). It does not block and may be called from Changed.
func (w *Watcher) Resync() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run watches the path until ctx is done, calling Changed after events.
// If the file system cannot be watched it logs why and returns only when
// ctx is done. It returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		w.log.Error(w.cfg.What+": cannot watch; it reloads on SIGHUP only", "path", w.cfg.Path, "err", err)
		<-ctx.Done()
		return nil
	}
	defer fw.Close()
	w.sync(fw)
	// A change made before the watches were in place is seen by a first
	// call, after the quiet time like any other: a write in progress
	// finishes first.
	timer := time.NewTimer(w.cfg.Debounce)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			w.log.Debug(w.cfg.What+": path changed", "event", ev.String())
			timer.Reset(w.cfg.Debounce)
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			w.log.Warn(w.cfg.What+": watching", "path", w.cfg.Path, "err", err)
		case <-timer.C:
			w.sync(fw) // directories may have come or gone
			w.cfg.Changed()
		case <-w.kick:
			w.sync(fw)
		}
	}
}

// sync watches the path's parent, the directory of the file a symlink at
// the path names, the path if it is a directory and its visible
// subdirectories, and stops watching directories that are gone.
// Adding a watched path again re-resolves it, which follows a symlink that
// was swapped.
func (w *Watcher) sync(fw *fsnotify.Watcher) {
	want := map[string]bool{filepath.Dir(filepath.Clean(w.cfg.Path)): true}
	st, err := os.Stat(w.cfg.Path)
	if err == nil && !st.IsDir() {
		if real, err := filepath.EvalSymlinks(w.cfg.Path); err == nil {
			want[filepath.Dir(real)] = true // a file behind a symlink, written in place
		}
	}
	if err == nil && st.IsDir() {
		root := filepath.Clean(w.cfg.Path)
		want[root] = true
		if real, err := filepath.EvalSymlinks(root); err == nil {
			root = real // subdirectories of the directory it names
		}
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == root {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				want[p] = true
			}
			return nil
		})
	}
	for _, p := range fw.WatchList() {
		if !want[p] {
			_ = fw.Remove(p)
		}
	}
	for p := range want {
		if err := fw.Add(p); err != nil {
			w.log.Warn(w.cfg.What+": cannot watch", "dir", p, "err", err)
		}
	}
}
