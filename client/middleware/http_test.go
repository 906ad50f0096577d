package middleware_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/client/middleware"
)

// req is one request of a sequence and what its answer must be.
type req struct {
	remote  string            // RemoteAddr; "" means 192.0.2.1:1234
	header  map[string]string // request headers
	status  int
	passed  bool              // the handler ran
	headers map[string]string // response headers; "" means absent
}

// serve runs reqs in order through mw around a handler that answers 200.
func serve(t *testing.T, mw func(http.Handler) http.Handler, reqs []req) {
	t.Helper()
	var calls atomic.Int64
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	for i, rq := range reqs {
		r := httptest.NewRequest("GET", "/things/7", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		if rq.remote != "" {
			r.RemoteAddr = rq.remote
		}
		for k, v := range rq.header {
			r.Header.Set(k, v)
		}
		before := calls.Load()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != rq.status {
			t.Errorf("request %d: status %d, want %d (body %q)", i, w.Code, rq.status, w.Body.String())
		}
		if passed := calls.Load() > before; passed != rq.passed {
			t.Errorf("request %d: handler ran: %v, want %v", i, passed, rq.passed)
		}
		for k, want := range rq.headers {
			if got := w.Header().Get(k); got != want {
				t.Errorf("request %d: %s = %q, want %q", i, k, got, want)
			}
		}
	}
}

var perMinute = func(n int64) client.Limit { return client.Limit{Limit: n, Period: time.Minute} }

func TestHTTP(t *testing.T) {
	noHeaders := map[string]string{"RateLimit": "", "RateLimit-Policy": "", "Retry-After": ""}
	for _, tc := range []struct {
		name  string
		rules []middleware.HTTPRule
		reqs  []req
	}{{
		name:  "allow sets the headers; the third request in a minute is denied with Retry-After",
		rules: []middleware.HTTPRule{{Name: "h-ip", Key: peerIP(t), Limit: perMinute(2)}},
		reqs: []req{
			{status: 200, passed: true, headers: map[string]string{
				"RateLimit-Policy": `"h-ip";q=2;w=60`, "RateLimit": `"h-ip";r=1;t=30`,
				"RateLimit-Limit": "2", "RateLimit-Remaining": "1", "RateLimit-Reset": "30", "Retry-After": ""}},
			{status: 200, passed: true, headers: map[string]string{"RateLimit": `"h-ip";r=0;t=60`, "Retry-After": ""}},
			{status: 429, headers: map[string]string{
				"RateLimit-Policy": `"h-ip";q=2;w=60`, "RateLimit": `"h-ip";r=0;t=60`, "Retry-After": "30"}},
			// Another client has its own bucket.
			{remote: "192.0.2.2:1", status: 200, passed: true, headers: map[string]string{"RateLimit": `"h-ip";r=1;t=30`}},
		},
	}, {
		name: "layered: per IP and per API key in one call; the most restrictive rule is described",
		rules: []middleware.HTTPRule{
			{Name: "l-ip", Key: peerIP(t), Limit: perMinute(10)},
			{Name: "l-key", Key: middleware.Header("X-API-Key"), Limit: perMinute(1)},
		},
		reqs: []req{
			{header: map[string]string{"X-API-Key": "a"}, status: 200, passed: true,
				headers: map[string]string{"RateLimit": `"l-key";r=0;t=60`, "RateLimit-Policy": `"l-key";q=1;w=60`}},
			{remote: "192.0.2.9:1", header: map[string]string{"X-API-Key": "a"}, status: 429,
				headers: map[string]string{"RateLimit": `"l-key";r=0;t=60`, "Retry-After": "60"}},
			// No key: only the IP rule applies (its second request).
			{status: 200, passed: true, headers: map[string]string{"RateLimit": `"l-ip";r=8;t=12`, "RateLimit-Policy": `"l-ip";q=10;w=60`}},
			{header: map[string]string{"X-API-Key": "b"}, status: 200, passed: true,
				headers: map[string]string{"RateLimit": `"l-key";r=0;t=60`}},
		},
	}, {
		name:  "no rule applies: through without headers",
		rules: []middleware.HTTPRule{{Name: "n-key", Key: middleware.Header("X-API-Key"), Limit: perMinute(1)}},
		reqs:  []req{{status: 200, passed: true, headers: noHeaders}, {status: 200, passed: true, headers: noHeaders}},
	}, {
		name:  "a key over 1024 bytes is bad input",
		rules: []middleware.HTTPRule{{Name: "b-key", Key: middleware.Header("X-API-Key"), Limit: perMinute(1)}},
		reqs: []req{
			{header: map[string]string{"X-API-Key": strings.Repeat("k", 1020)}, status: 400, headers: noHeaders},
			{header: map[string]string{"X-API-Key": strings.Repeat("k", 1018)}, status: 200, passed: true},
		},
	}, {
		name: "route and IP joined: a limit per client per route",
		rules: []middleware.HTTPRule{{Name: "r", Limit: perMinute(1),
			Key: middleware.JoinHTTP(" ", middleware.Route(routes()), peerIP(t))}},
		reqs: []req{
			{status: 200, passed: true, headers: map[string]string{"RateLimit": `"r";r=0;t=60`}},
			{status: 429},
			{remote: "192.0.2.3:1", status: 200, passed: true},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			mw, err := middleware.NewHTTP(middleware.HTTPConfig{Client: newClient(t), Rules: tc.rules, FailMode: middleware.FailClosed})
			if err != nil {
				t.Fatal(err)
			}
			serve(t, mw, tc.reqs)
		})
	}
}

// routes is a mux with the test's route.
func routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /things/{id}", func(http.ResponseWriter, *http.Request) {})
	return mux
}

func peerIP(t *testing.T) middleware.HTTPKeyFunc {
	t.Helper()
	f, err := middleware.ClientIP(middleware.ClientIPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// When Sluice cannot answer, FailOpen lets requests through without
// RateLimit headers and FailClosed answers 503; both report the error.
func TestHTTPUnreachable(t *testing.T) {
	for _, tc := range []struct {
		mode   middleware.FailMode
		status int
		passed bool
	}{{middleware.FailOpen, 200, true}, {middleware.FailClosed, 503, false}} {
		var reported atomic.Int64
		mw, err := middleware.NewHTTP(middleware.HTTPConfig{
			Client: unreachableClient(t), FailMode: tc.mode,
			Rules:   []middleware.HTTPRule{{Name: "u", Key: peerIP(t), Limit: perMinute(5)}},
			OnError: func(*http.Request, error) { reported.Add(1) },
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		serve(t, mw, []req{{status: tc.status, passed: tc.passed,
			headers: map[string]string{"RateLimit": "", "Retry-After": ""}}})
		if reported.Load() != 1 {
			t.Errorf("mode %d: OnError called %d times, want 1", tc.mode, reported.Load())
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("mode %d: the request took %s; the client's timeout is 500ms", tc.mode, d)
		}
	}
}

// A rule the node refuses (a policy it does not have) is the service's
// misconfiguration, not an outage: the request is refused 500 whatever
// the FailMode, never let through, and the error wraps ErrRuleRejected.
func TestHTTPUnknownPolicy(t *testing.T) {
	for _, mode := range []middleware.FailMode{middleware.FailOpen, middleware.FailClosed} {
		var errs []error
		mw, err := middleware.NewHTTP(middleware.HTTPConfig{
			Client: newClient(t), FailMode: mode,
			Rules: []middleware.HTTPRule{{Name: "ip", Key: peerIP(t), Limit: perMinute(100)},
				{Key: peerIP(t), Policy: "no-such-policy"}},
			OnError: func(_ *http.Request, err error) { errs = append(errs, err) },
		})
		if err != nil {
			t.Fatal(err)
		}
		serve(t, mw, []req{{status: 500, passed: false}})
		if len(errs) != 1 || !errors.Is(errs[0], middleware.ErrRuleRejected) || !strings.Contains(errs[0].Error(), "no-such-policy") {
			t.Fatalf("mode %d: errors %v, want one wrapping ErrRuleRejected naming the policy", mode, errs)
		}
	}
}

// Without OnError, the middleware logs what it did with each request
// Sluice did not decide: a request let through by FailOpen at WARN, one
// refused for an unknown policy at ERROR (TestErrorLogRateLimit: one line
// a second per reason).
func TestHTTPDefaultOnError(t *testing.T) {
	var buf bytes.Buffer // the handler runs on this goroutine
	log := slog.New(slog.NewTextHandler(&buf, nil))
	down, err := middleware.NewHTTP(middleware.HTTPConfig{
		Client: unreachableClient(t), FailMode: middleware.FailOpen, Logger: log,
		Rules: []middleware.HTTPRule{{Name: "u", Key: peerIP(t), Limit: perMinute(5)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, down, []req{{status: 200, passed: true}})
	unknown, err := middleware.NewHTTP(middleware.HTTPConfig{
		Client: newClient(t), FailMode: middleware.FailOpen, Logger: log,
		Rules: []middleware.HTTPRule{{Key: peerIP(t), Policy: "per-key-nowhere"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	serve(t, unknown, []req{{status: 500, passed: false}})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %d lines, want 2:\n%s", len(lines), buf.String())
	}
	for i, want := range []string{`level=WARN msg="sluice middleware: Sluice did not decide a request" action="let through (FailOpen)" target="GET /things/7"`,
		`level=ERROR msg="sluice middleware: Sluice did not decide a request" action="refused: the rule is misconfigured"`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s\nwant it to contain %s", i, lines[i], want)
		}
	}
	if !strings.Contains(lines[1], "per-key-nowhere") {
		t.Errorf("the ERROR line does not name the policy: %s", lines[1])
	}
}

// Bad configuration is an error wrapping ErrConfig, never a panic.
func TestNewHTTPConfigErrors(t *testing.T) {
	c := newClient(t)
	key := middleware.Header("X-Key")
	good := middleware.HTTPRule{Name: "g", Key: key, Limit: perMinute(1)}
	for _, tc := range []struct {
		name string
		cfg  middleware.HTTPConfig
	}{
		{"nil client", middleware.HTTPConfig{Rules: []middleware.HTTPRule{good}, FailMode: middleware.FailOpen}},
		{"no rules", middleware.HTTPConfig{Client: c, FailMode: middleware.FailOpen}},
		{"no fail mode", middleware.HTTPConfig{Client: c, Rules: []middleware.HTTPRule{good}}},
		{"unknown fail mode", middleware.HTTPConfig{Client: c, Rules: []middleware.HTTPRule{good}, FailMode: 7}},
		{"no key func", middleware.HTTPConfig{Client: c, FailMode: middleware.FailOpen,
			Rules: []middleware.HTTPRule{{Name: "x", Limit: perMinute(1)}}}},
		{"no name or policy", middleware.HTTPConfig{Client: c, FailMode: middleware.FailOpen,
			Rules: []middleware.HTTPRule{{Key: key, Limit: perMinute(1)}}}},
		{"no limit", middleware.HTTPConfig{Client: c, FailMode: middleware.FailOpen,
			Rules: []middleware.HTTPRule{{Name: "x", Key: key}}}},
		{"negative cost", middleware.HTTPConfig{Client: c, FailMode: middleware.FailOpen,
			Rules: []middleware.HTTPRule{{Name: "x", Key: key, Limit: perMinute(1), Cost: -1}}}},
		{"concurrency", middleware.HTTPConfig{Client: c, FailMode: middleware.FailOpen,
			Rules: []middleware.HTTPRule{{Name: "x", Key: key, Limit: client.Limit{Algorithm: client.Concurrency, Limit: 1}}}}},
	} {
		mw, err := middleware.NewHTTP(tc.cfg)
		if !errors.Is(err, middleware.ErrConfig) || mw != nil {
			t.Errorf("%s: NewHTTP = %v, %v; want nil and an ErrConfig", tc.name, mw != nil, err)
		}
	}
}

// Route keys by the matched pattern, inside the mux (r.Pattern) or
// around it (the mux is asked); a request matching nothing has no key.
func TestRoute(t *testing.T) {
	c := newClient(t)
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	newMW := func(name string, mux *http.ServeMux) func(http.Handler) http.Handler {
		mw, err := middleware.NewHTTP(middleware.HTTPConfig{Client: c, FailMode: middleware.FailClosed,
			Rules: []middleware.HTTPRule{{Name: name, Key: middleware.Route(mux), Limit: perMinute(1)}}})
		if err != nil {
			t.Fatal(err)
		}
		return mw
	}
	inside := http.NewServeMux()
	inside.Handle("GET /items/{id}", newMW("route-in", nil)(ok))
	outside := http.NewServeMux()
	outside.Handle("GET /items/{id}", ok)
	wrapped := newMW("route-out", outside)(outside)
	for _, tc := range []struct {
		h         http.Handler
		path      string
		status    int
		rateLimit string
	}{
		{inside, "/items/1", 200, `"route-in";r=0;t=60`},
		{inside, "/items/2", 429, `"route-in";r=0;t=60`}, // one pattern, one key
		{wrapped, "/items/1", 200, `"route-out";r=0;t=60`},
		{wrapped, "/items/2", 429, `"route-out";r=0;t=60`},
		{wrapped, "/nothing", 404, ""},
		{wrapped, "/nothing", 404, ""},
	} {
		w := httptest.NewRecorder()
		tc.h.ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		if w.Code != tc.status || w.Header().Get("RateLimit") != tc.rateLimit {
			t.Errorf("%s: %d %q, want %d %q", tc.path, w.Code, w.Header().Get("RateLimit"), tc.status, tc.rateLimit)
		}
	}
}
