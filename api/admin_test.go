package api

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluice-rl/sluice/limiter"
)

// lockedBuffer is a log sink safe for the handler's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A reset is logged with the caller's identity, the key and the new
// remaining, and counted; a refusal is logged and counted apart; an
// inspect is neither.
func TestAdminResetLoggedAndCounted(t *testing.T) {
	lim, err := limiter.New(limiter.Config{NodeName: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	var logs lockedBuffer
	const token = "dG9rZW4tZm9yLXRoZS1hZG1pbi10ZXN0"
	admin, err := NewAdmin(AdminConfig{Service: lim, Tokens: func() [][]byte { return [][]byte{[]byte(token)} },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := mustHandler(t, HTTPConfig{Checker: lim, Admin: admin})
	call := func(path, auth, body string) int {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		return rr.Code
	}
	body := `{"key":"user:42","limit":10,"period":"1h","remaining":3}`
	if code := call("/v1/admin/inspect", "Bearer "+token, `{"key":"user:42","limit":10,"period":"1h"}`); code != http.StatusOK {
		t.Fatalf("inspect: %d", code)
	}
	if code := call("/v1/admin/reset", "bearer "+token, body); code != http.StatusOK {
		t.Fatalf("reset: %d", code)
	}
	if code := call("/v1/admin/reset", "Bearer nope", body); code != http.StatusForbidden {
		t.Fatalf("reset with a wrong token: %d", code)
	}
	if got := testutil.ToFloat64(admin.resets); got != 1 {
		t.Fatalf("resets counted %v, want 1", got)
	}
	if got := testutil.ToFloat64(admin.refused); got != 1 {
		t.Fatalf("refusals counted %v, want 1", got)
	}
	out := logs.String()
	for _, want := range []string{`msg="admin reset"`, `caller="token sha256:`, `key=user:42`, `to=3`, `owner=n0`, `msg="admin call refused"`, "refusal=true"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, token) {
		t.Errorf("the log holds the token:\n%s", out)
	}
}
