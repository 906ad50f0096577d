package node

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The admin token file: read at start (a bad file is an error naming the
// field), then re-read when it changes, at most once a second; a bad
// rewrite keeps the tokens in force.
func TestAdminTokensReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	tok := func(c byte) string { return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(c), 24))) }
	write := func(s string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	write(tok('a')+"\n", base)
	at := atomic.Int64{}
	at.Store(base.UnixNano())
	ts, err := newAdminTokens(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ts.now = func() time.Time { return time.Unix(0, at.Load()) }
	ts.checked = ts.now()
	has := func(s string) bool {
		for _, x := range ts.current() {
			if string(x) == s {
				return true
			}
		}
		return false
	}
	if !has(tok('a')) {
		t.Fatal("the token of the file is not in force")
	}
	write("# rotated\n"+tok('b')+"\n"+tok('c')+"\n", base.Add(time.Minute))
	if has(tok('b')) {
		t.Fatal("re-read sooner than a second after the last look")
	}
	at.Add(int64(2 * time.Second))
	if !has(tok('b')) || !has(tok('c')) || has(tok('a')) {
		t.Fatalf("after a rewrite: %q", ts.current())
	}
	write("not base64!\n", base.Add(2*time.Minute))
	at.Add(int64(2 * time.Second))
	if !has(tok('b')) {
		t.Fatal("a bad rewrite dropped the tokens in force")
	}
	for name, content := range map[string]string{
		"empty":     "",
		"short":     base64.StdEncoding.EncodeToString([]byte("short")) + "\n",
		"not b64":   "hello world\n",
		"only note": "# nothing\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := newAdminTokens(p, nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "AdminTokenFile") {
			t.Errorf("%s: %v, want ErrInvalidConfig naming AdminTokenFile", name, err)
		}
	}
	if _, err := newAdminTokens(filepath.Join(dir, "missing"), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("missing file: %v", err)
	}
}
