package middleware

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// The default OnError logs one line a second per reason; the next line of
// a reason counts the requests of that reason it did not log.
func TestErrorLogRateLimit(t *testing.T) {
	var buf bytes.Buffer
	e := newErrorLog(slog.New(slog.NewTextHandler(&buf, nil)))
	now := time.Unix(1000, 0)
	e.now = func() time.Time { return now }
	down := &decision{allow: true, err: errors.New("unavailable"), reason: "Unavailable "}
	bad := &decision{rejected: true, err: errors.New("unknown policy"), reason: "rejected p"}
	for range 5 {
		e.report(context.Background(), "GET /", down)
	}
	e.report(context.Background(), "GET /", bad) // another reason: logged at once
	now = now.Add(999 * time.Millisecond)
	e.report(context.Background(), "GET /", down)
	now = now.Add(time.Millisecond)
	e.report(context.Background(), "GET /", down)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=WARN msg="sluice middleware: Sluice did not decide a request" action="let through (FailOpen)" target="GET /" error=unavailable suppressed=0`,
		`level=ERROR msg="sluice middleware: Sluice did not decide a request" action="refused: the rule is misconfigured" target="GET /" error="unknown policy" suppressed=0`,
		`level=WARN msg="sluice middleware: Sluice did not decide a request" action="let through (FailOpen)" target="GET /" error=unavailable suppressed=5`,
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i := range want {
		if !strings.HasSuffix(lines[i], want[i]) {
			t.Errorf("line %d: %s\nwant it to end %s", i, lines[i], want[i])
		}
	}
}
