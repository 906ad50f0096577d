package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInvalid is wrapped by every *FileError.
var ErrInvalid = errors.New("tlsconfig: invalid")

// DefaultCheckInterval is how often, at most, a Source stats its files.
const DefaultCheckInterval = time.Second

// File is one PEM file of a Source and the name of the setting it comes
// from, used in errors ("TLSCertFile").
type File struct {
	// Path is the file's path; empty means none.
	Path string
	// Field names the setting that gave Path, for errors.
	Field string
}

// FileError reports a file that cannot be used. It wraps ErrInvalid and
// reads "tlsconfig: invalid: Field (path): reason".
type FileError struct {
	// Field is the File.Field of the file.
	Field string
	// Path is its path.
	Path string
	// Err says what is wrong.
	Err error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%v: %s (%s): %v", ErrInvalid, e.Field, e.Path, e.Err)
}

// Unwrap returns ErrInvalid and the cause.
func (e *FileError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// Config configures a Source.
type Config struct {
	// Cert and Key are the PEM certificate chain (leaf first) and its
	// private key. Both are required.
	Cert, Key File
	// CA is an optional PEM bundle of CA certificates: the roots that
	// verify the other side (client certificates on a listener, server
	// certificates on a dialer).
	CA File
	// CheckInterval is how often, at most, the files are stat'ed for a
	// change, at a handshake; 0 means DefaultCheckInterval, a negative
	// value checks at every handshake (tests).
	CheckInterval time.Duration
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time
	// Logger receives reloads and failed reloads; nil discards them.
	Logger *slog.Logger
}

// Material is what a Source holds at one time. It is immutable.
type Material struct {
	// Cert is the certificate and key; Cert.Leaf is parsed.
	Cert *tls.Certificate
	// Pool holds the CA certificates; nil without Config.CA.
	Pool *x509.CertPool
	// CAs are the CA certificates of Pool, parsed.
	CAs []*x509.Certificate
}

// Source is a certificate, key and CA bundle loaded from files and
// reloaded when they change. It is safe for concurrent use.
type Source struct {
	cfg   Config
	files []File
	log   *slog.Logger
	cur   atomic.Pointer[Material]
	// next is when (UnixNano) the files are due for a check: the fast
	// path of Current reads it without locking.
	next atomic.Int64

	mu     sync.Mutex // serializes checks
	stamps []stamp
	failed bool // the last reload failed; logged once until it succeeds
}

// stamp is what a check compares: a file's modification time, size and
// identity. The identity (os.SameFile) catches a symlink swap to another
// file of the same size written within the same tick of the file
// system's clock, which the time and size alone miss.
type stamp struct {
	mod  time.Time
	size int64
	fi   os.FileInfo
}

// New loads the files of cfg. An error is a *FileError naming the field.
func New(cfg Config) (*Source, error) {
	switch {
	case cfg.Cert.Path == "":
		return nil, &FileError{Field: cfg.Cert.Field, Err: fmt.Errorf("required with %s", cfg.Key.Field)}
	case cfg.Key.Path == "":
		return nil, &FileError{Field: cfg.Key.Field, Err: fmt.Errorf("required with %s", cfg.Cert.Field)}
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	s := &Source{cfg: cfg, files: []File{cfg.Cert, cfg.Key}, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.CA.Path != "" {
		s.files = append(s.files, cfg.CA)
	}
	stamps, err := s.stat()
	if err != nil {
		return nil, err
	}
	m, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(m)
	s.stamps = stamps
	s.next.Store(s.due(cfg.Clock()))
	return s, nil
}

// Current returns the material in force, after reloading the files if the
// check interval has passed and one of them changed.
func (s *Source) Current() *Material {
	s.maybeReload()
	return s.cur.Load()
}

// maybeReload stats the files when the check interval has passed, and
// reloads them when one changed. A failure keeps what is in force.
func (s *Source) maybeReload() {
	now := s.cfg.Clock()
	if now.UnixNano() < s.next.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.UnixNano() < s.next.Load() {
		return // another caller just checked
	}
	s.next.Store(s.due(now))
	stamps, err := s.stat()
	if err == nil && equalStamps(stamps, s.stamps) {
		return
	}
	var m *Material
	if err == nil {
		m, err = s.load()
	}
	if err != nil {
		// Mid-rotation (a key not written yet) or a removed file: keep
		// serving the old pair and try again at the next check.
		if !s.failed {
			s.log.Warn("tls: certificate reload failed; keeping the one in force", "err", err)
		}
		s.failed = true
		return
	}
	s.failed = false
	s.stamps = stamps
	s.cur.Store(m)
	s.log.Info("tls: certificate reloaded", "file", s.cfg.Cert.Path, "subject", m.Cert.Leaf.Subject.String(),
		"not_after", m.Cert.Leaf.NotAfter)
}

// due is when the next check after one at now is due.
func (s *Source) due(now time.Time) int64 {
	if s.cfg.CheckInterval < 0 {
		return now.UnixNano() // every call
	}
	return now.Add(s.cfg.CheckInterval).UnixNano()
}

func equalStamps(a, b []stamp) bool {
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size || !os.SameFile(a[i].fi, b[i].fi) {
			return false
		}
	}
	return len(a) == len(b)
}

// stat returns the stamps of the files, following symlinks.
func (s *Source) stat() ([]stamp, error) {
	out := make([]stamp, len(s.files))
	for i, f := range s.files {
		fi, err := os.Stat(f.Path)
		if err != nil {
			return nil, &FileError{Field: f.Field, Path: f.Path, Err: err}
		}
		out[i] = stamp{mod: fi.ModTime(), size: fi.Size(), fi: fi}
	}
	return out, nil
}

// load reads and parses the files.
func (s *Source) load() (*Material, error) {
	c, k := s.cfg.Cert, s.cfg.Key
	certPEM, err := os.ReadFile(c.Path)
	if err != nil {
		return nil, &FileError{Field: c.Field, Path: c.Path, Err: err}
	}
	keyPEM, err := os.ReadFile(k.Path)
	if err != nil {
		return nil, &FileError{Field: k.Field, Path: k.Path, Err: err}
	}
	if !hasBlock(certPEM, "CERTIFICATE") {
		return nil, &FileError{Field: c.Field, Path: c.Path, Err: errors.New("no PEM CERTIFICATE block")}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &FileError{Field: k.Field, Path: k.Path, Err: fmt.Errorf("with %s: %w", c.Field, err)}
	}
	m := &Material{Cert: &pair}
	if s.cfg.CA.Path == "" {
		return m, nil
	}
	ca := s.cfg.CA
	caPEM, err := os.ReadFile(ca.Path)
	if err != nil {
		return nil, &FileError{Field: ca.Field, Path: ca.Path, Err: err}
	}
	m.Pool = x509.NewCertPool()
	for rest := caPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, &FileError{Field: ca.Field, Path: ca.Path, Err: err}
		}
		m.Pool.AddCert(cert)
		m.CAs = append(m.CAs, cert)
	}
	if len(m.CAs) == 0 {
		return nil, &FileError{Field: ca.Field, Path: ca.Path, Err: errors.New("no PEM CERTIFICATE block")}
	}
	return m, nil
}

// hasBlock reports whether b holds a PEM block of the type.
func hasBlock(b []byte, typ string) bool {
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return false
		}
		if blk.Type == typ {
			return true
		}
	}
}
