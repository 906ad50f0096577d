package clustersecret

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-rl/sluice/internal/watch"
)

// Status describes a Source: the secrets by fingerprint only.
type Status struct {
	// Primary is the fingerprint of the secret presented.
	Primary string
	// Accepted are the fingerprints of every secret, the primary first.
	Accepted []string
	// Reloads counts the re-reads that changed the secrets.
	Reloads uint64
	// Rejected counts the re-reads that failed: the secrets in force were
	// kept.
	Rejected uint64
}

// Source is a cluster secret file, loaded and re-read when it changes.
// It is safe for concurrent use.
type Source struct {
	path     string
	log      *slog.Logger
	onChange func(*Material)
	cur      atomic.Pointer[Material]
	mu       sync.Mutex // serializes reloads
	reloads  atomic.Uint64
	rejected atomic.Uint64
}

// NewSource loads path. onChange, if not nil, is called (under the
// reload lock, so in order) with the new material after each reload that
// changed the secrets; logger receives reloads (nil: discarded). An error
// is a *FileError, or wraps ErrBadFile.
func NewSource(path string, onChange func(*Material), logger *slog.Logger) (*Source, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	secrets, err := Load(path)
	if err != nil {
		return nil, err
	}
	m, err := Derive(secrets)
	if err != nil {
		return nil, err
	}
	s := &Source{path: path, log: logger, onChange: onChange}
	s.cur.Store(m)
	return s, nil
}

// Current returns the material in force.
func (s *Source) Current() *Material { return s.cur.Load() }

// Path returns the file's path.
func (s *Source) Path() string { return s.path }

// Status returns the secrets in force and the reload counts.
func (s *Source) Status() Status {
	m := s.cur.Load()
	return Status{Primary: m.Fingerprints[0], Accepted: slices.Clone(m.Fingerprints),
		Reloads: s.reloads.Load(), Rejected: s.rejected.Load()}
}

// Reload re-reads the file. A file that cannot be used keeps the secrets
// in force: it is logged, counted in Status.Rejected and returned. An
// unchanged file changes nothing.
func (s *Source) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	secrets, err := Load(s.path)
	var m *Material
	if err == nil {
		m, err = Derive(secrets)
	}
	if err != nil {
		s.rejected.Add(1)
		s.log.Error("cluster secret: file rejected; keeping the secrets in force", "file", s.path, "err", err,
			"accepted", s.cur.Load().Fingerprints)
		return err
	}
	if slices.Equal(m.Fingerprints, s.cur.Load().Fingerprints) {
		return nil
	}
	s.cur.Store(m)
	s.reloads.Add(1)
	if s.onChange != nil {
		s.onChange(m)
	}
	s.log.Info("cluster secret: reloaded", "file", s.path, "primary", m.Fingerprints[0], "accepted", m.Fingerprints)
	return nil
}

// Run watches the file and reloads it when it changes, until ctx is done.
func (s *Source) Run(ctx context.Context) error {
	w, err := watch.New(watch.Config{Path: s.path, What: "cluster secret", Logger: s.log,
		Changed: func() { _ = s.Reload() }})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
