package node

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/api"
	"github.com/sluice-rl/sluice/internal/keyfile"
)

// The admin API's identities (Config.AdminNames, Config.AdminTokenFile):
// the names go to api.AdminConfig as they are; the token file is read
// here, at start (a bad file is an error of New) and again when it
// changes.

// adminTokenFormat is the token file's format (package keyfile).
var adminTokenFormat = keyfile.Format{
	Noun:      "token",
	MaxKeys:   64,
	MaxBytes:  64 << 10,
	BadBase64: func(err error) string { return "not standard base64 (want `openssl rand -base64 32`): " + err.Error() },
	Check: func(k []byte) string {
		if len(k) < 16 {
			return fmt.Sprintf("%d bytes, at least 16 (want `openssl rand -base64 32`)", len(k))
		}
		return ""
	},
	NoKey: "no token: want one standard base64 token a line (`openssl rand -base64 32`)",
}

// adminTokenCheckEvery bounds how often the token file is looked at.
const adminTokenCheckEvery = time.Second

// adminTokens are the tokens of an admin token file, re-read when the
// file's modification time or size changes, looked at no more than once
// every adminTokenCheckEvery.
type adminTokens struct {
	path string
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	tokens  [][]byte // as presented: the base64 text of each
	mod     time.Time
	size    int64
	checked time.Time
}

// newAdminTokens reads path; a bad file is an error naming it.
func newAdminTokens(path string, log *slog.Logger) (*adminTokens, error) {
	t := &adminTokens{path: path, log: log, now: time.Now}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: AdminTokenFile: %w", ErrInvalidConfig, err)
	}
	toks, err := loadAdminTokens(path)
	if err != nil {
		return nil, fmt.Errorf("%w: AdminTokenFile: %s: %w", ErrInvalidConfig, path, err)
	}
	t.tokens, t.mod, t.size, t.checked = toks, fi.ModTime(), fi.Size(), t.now()
	return t, nil
}

// loadAdminTokens reads a token file.
func loadAdminTokens(path string) ([][]byte, error) {
	keys, err := keyfile.Load(path, adminTokenFormat)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = []byte(base64.StdEncoding.EncodeToString(k))
	}
	return out, nil
}

// current returns the tokens in force, re-reading the file first if it
// changed since it was last read.
func (t *adminTokens) current() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if now.Sub(t.checked) < adminTokenCheckEvery {
		return t.tokens
	}
	t.checked = now
	fi, err := os.Stat(t.path)
	if err != nil {
		t.log.Warn("admin token file unreadable; keeping the tokens in force", "file", t.path, "err", err)
		return t.tokens
	}
	if fi.ModTime().Equal(t.mod) && fi.Size() == t.size {
		return t.tokens
	}
	toks, err := loadAdminTokens(t.path)
	if err != nil {
		t.log.Warn("admin token file refused; keeping the tokens in force", "file", t.path, "err", err)
		return t.tokens
	}
	t.tokens, t.mod, t.size = toks, fi.ModTime(), fi.Size()
	t.log.Info("admin token file reloaded", "file", t.path, "tokens", len(toks))
	return t.tokens
}

// newAdmin builds the admin API (registered on the gRPC server, and
// served on HTTP).
func (n *Node) newAdmin(reg prometheus.Registerer) (*api.Admin, error) {
	cfg := api.AdminConfig{Service: n.limiter, Names: n.cfg.AdminNames, Logger: n.log, Registerer: reg}
	if n.cfg.AdminTokenFile != "" {
		t, err := newAdminTokens(n.cfg.AdminTokenFile, n.log)
		if err != nil {
			return nil, err
		}
		cfg.Tokens = t.current
	}
	a, err := api.NewAdmin(cfg)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return a, nil
}
