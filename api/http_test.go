package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/store"
)

const testPolicies = `
policies:
  login:
    algorithm: fixed_window
    limit: 2
    period: 1m
    failure_mode: deny
  api:
    limit: 100
    period: 1m
    burst: 200
`

// testServer is a real limiter behind the HTTP API.
type testServer struct {
	*httptest.Server
	clock *limitertest.Clock
	ready atomic.Bool
}

type serverOpts struct {
	policies string
	store    store.Config
}

func newTestServer(t *testing.T, opts serverOpts) *testServer {
	t.Helper()
	// A whole minute, so that fixed windows start now.
	ts := &testServer{clock: limitertest.NewClock(time.Unix(1_699_999_980, 0))}
	ts.ready.Store(true)
	set := policy.Empty()
	if opts.policies != "" {
		var err error
		if set, err = policy.Parse([]byte(opts.policies)); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	lim, err := limiter.New(limiter.Config{NodeName: "node-a", Clock: ts.clock.Now, Store: opts.store, Policies: set, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ts.Server = httptest.NewServer(mustHandler(t, HTTPConfig{
		Checker:  lim,
		Gatherer: reg,
		Metrics:  m,
		Ready:    ts.ready.Load,
	}))
	t.Cleanup(ts.Close)
	return ts
}

// answer is a response, body read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, a.body) }

func do(t *testing.T, srv *httptest.Server, method, path, body string, hdr ...string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func post(t *testing.T, srv *httptest.Server, body string) answer {
	t.Helper()
	return do(t, srv, http.MethodPost, "/v1/check", body, "Content-Type", "application/json")
}

func decode[T any](t *testing.T, a answer) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %s: %v", a, err)
	}
	return v
}

func wantHeaders(t *testing.T, a answer, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := a.header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
}

func TestHTTPCheckAllowed(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	a := post(t, ts.Server, `{"checks":[{"key":"user:42","limit":100,"period":"1m","burst":100,"cost":1,"algorithm":"token_bucket","failure_mode":"local"}]}`)
	if a.status != http.StatusOK {
		t.Fatalf("got %s, want 200", a)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	// The wire format, field by field.
	var raw map[string][]map[string]any
	if err := json.Unmarshal(a.body, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"allowed": true, "limit": 100.0, "remaining": 99.0, "reset_after": "600ms",
		"retry_after": "0s", "source": "owner", "owner": "node-a",
	}
	if len(raw["results"]) != 1 {
		t.Fatalf("results = %v", raw)
	}
	got := raw["results"][0]
	if len(got) != len(want) {
		t.Errorf("result = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("result[%s] = %v, want %v", k, got[k], v)
		}
	}
	wantHeaders(t, a, map[string]string{
		"RateLimit-Policy":    `"default";q=100;w=60`,
		"RateLimit":           `"default";r=99;t=1`,
		"RateLimit-Limit":     "100",
		"RateLimit-Remaining": "99",
		"RateLimit-Reset":     "1",
		"Retry-After":         "",
	})
}

func TestHTTPCheckDenied(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	const body = `{"checks":[{"key":"k","limit":2,"period":"1m"}]}`
	for i := 0; i < 2; i++ {
		if a := post(t, ts.Server, body); a.status != http.StatusOK {
			t.Fatalf("check %d: %s", i, a)
		}
	}
	a := post(t, ts.Server, body)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("got %s, want 429", a)
	}
	res := decode[checkResponseJSON](t, a).Results[0]
	if res.Allowed || res.Remaining != 0 || res.RetryAfter != "30s" || res.ResetAfter != "1m0s" {
		t.Errorf("result = %+v", res)
	}
	wantHeaders(t, a, map[string]string{
		"Retry-After":         "30",
		"RateLimit":           `"default";r=0;t=60`,
		"RateLimit-Policy":    `"default";q=2;w=60`,
		"RateLimit-Remaining": "0",
		"RateLimit-Reset":     "60",
	})

	// 29.5s later the wait is 0.5s: Retry-After rounds up to 1.
	ts.clock.Advance(29500 * time.Millisecond)
	a = post(t, ts.Server, body)
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "1" {
		t.Errorf("got %s, Retry-After %q; want 429 and 1", a, a.header.Get("Retry-After"))
	}
	ts.clock.Advance(500 * time.Millisecond)
	if a := post(t, ts.Server, body); a.status != http.StatusOK {
		t.Errorf("after the wait: %s", a)
	}
}

func TestHTTPCheckPolicy(t *testing.T) {
	ts := newTestServer(t, serverOpts{policies: testPolicies})
	const body = `{"checks":[{"key":"alice","policy":"login"}]}`
	a := post(t, ts.Server, body)
	if a.status != http.StatusOK {
		t.Fatalf("got %s", a)
	}
	res := decode[checkResponseJSON](t, a).Results[0]
	if res.Policy != "login" || res.Limit != 2 || res.Remaining != 1 {
		t.Errorf("result = %+v", res)
	}
	wantHeaders(t, a, map[string]string{
		"RateLimit-Policy": `"login";q=2;w=60`,
		"RateLimit":        `"login";r=1;t=60`,
	})
	post(t, ts.Server, body)
	a = post(t, ts.Server, body)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("third check: %s", a)
	}
	wantHeaders(t, a, map[string]string{"Retry-After": "60", "RateLimit": `"login";r=0;t=60`})
}

func TestHTTPHeadersMostRestrictive(t *testing.T) {
	ts := newTestServer(t, serverOpts{policies: testPolicies})
	// One item denied (login exhausted), one allowed with much left.
	post(t, ts.Server, `{"checks":[{"key":"bob","policy":"login","cost":2}]}`)
	a := post(t, ts.Server, `{"checks":[{"key":"bob","policy":"api"},{"key":"bob","policy":"login"},{"key":"x","limit":5,"period":"1s"}]}`)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("got %s", a)
	}
	wantHeaders(t, a, map[string]string{
		"RateLimit-Policy": `"login";q=2;w=60`,
		"RateLimit":        `"login";r=0;t=60`,
		"Retry-After":      "60",
	})
	res := decode[checkResponseJSON](t, a).Results
	if len(res) != 3 || !res[0].Allowed || res[1].Allowed || !res[2].Allowed {
		t.Errorf("results = %+v", res)
	}

	// Nothing denied: the lowest remaining wins.
	a = post(t, ts.Server, `{"checks":[{"key":"carol","policy":"api"},{"key":"carol","limit":5,"period":"1s"}]}`)
	if a.status != http.StatusOK {
		t.Fatalf("got %s", a)
	}
	wantHeaders(t, a, map[string]string{
		"RateLimit-Policy": `"default";q=5;w=1`,
		"RateLimit":        `"default";r=4;t=1`,
		"Retry-After":      "",
	})
}

func TestMostRestrictive(t *testing.T) {
	r := func(allowed bool, remaining int64, retry, reset time.Duration, err error) limiter.Result {
		return limiter.Result{Result: bucket.Result{Allowed: allowed, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}, Err: err}
	}
	cases := []struct {
		name string
		in   []limiter.Result
		want int
	}{
		{"empty", nil, -1},
		{"all errors", []limiter.Result{r(false, 0, 0, 0, store.ErrFull)}, -1},
		{"lowest remaining", []limiter.Result{r(true, 5, 0, 0, nil), r(true, 2, 0, 0, nil), r(true, 3, 0, 0, nil)}, 1},
		{"tie: longest reset", []limiter.Result{r(true, 2, 0, time.Second, nil), r(true, 2, 0, time.Minute, nil)}, 1},
		{"tie: first", []limiter.Result{r(true, 2, 0, time.Second, nil), r(true, 2, 0, time.Second, nil)}, 0},
		{"denied beats allowed", []limiter.Result{r(true, 0, 0, time.Hour, nil), r(false, 3, time.Second, 0, nil)}, 1},
		{"longest retry", []limiter.Result{r(false, 0, time.Second, 0, nil), r(false, 0, time.Minute, 0, nil), r(false, 0, 2*time.Second, 0, nil)}, 1},
		{"errors skipped", []limiter.Result{r(false, 0, time.Hour, 0, store.ErrFull), r(true, 9, 0, 0, nil)}, 1},
	}
	for _, tc := range cases {
		if got := mostRestrictive(tc.in); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSetRateLimitHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   limiter.Result
		want map[string]string // "" means absent
	}{
		{
			name: "sustained quota, not the burst",
			in: limiter.Result{Result: bucket.Result{Allowed: true, Limit: 200, Remaining: 199, ResetAfter: 600 * time.Millisecond},
				Policy: "api", Period: time.Minute, Quota: 100, Burst: 200},
			want: map[string]string{
				"RateLimit-Policy":    `"api";q=100;w=60;sluice-burst=200`,
				"RateLimit":           `"api";r=199;t=1`,
				"RateLimit-Limit":     "100",
				"RateLimit-Remaining": "199",
				"RateLimit-Reset":     "1",
				"Retry-After":         "",
			},
		},
		{
			name: "no burst: no sluice-burst",
			in: limiter.Result{Result: bucket.Result{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: 600 * time.Millisecond},
				Period: time.Minute, Quota: 100, Burst: 100},
			want: map[string]string{
				"RateLimit-Policy": `"default";q=100;w=60`,
				"RateLimit-Limit":  "100",
			},
		},
		{
			name: "fallback share: the policy as configured",
			in: limiter.Result{Result: bucket.Result{Allowed: true, Limit: 66, Remaining: 65, ResetAfter: time.Second},
				Policy: "api", Period: time.Minute, Quota: 100, Burst: 200},
			want: map[string]string{
				"RateLimit-Policy": `"api";q=100;w=60;sluice-burst=200`,
				"RateLimit":        `"api";r=65;t=1`,
				"RateLimit-Limit":  "100",
			},
		},
		{
			name: "escaped name, sub-second period, denied",
			in: limiter.Result{Result: bucket.Result{Allowed: false, Limit: 10, Remaining: -1, ResetAfter: 1500 * time.Millisecond, RetryAfter: time.Nanosecond},
				Policy: `we"ird\`, Period: 10 * time.Millisecond, Quota: 10, Burst: 10},
			want: map[string]string{
				"RateLimit-Policy":    `"we\"ird\\";q=10;w=1`,
				"RateLimit":           `"we\"ird\\";r=0;t=2`,
				"RateLimit-Limit":     "10",
				"RateLimit-Remaining": "0",
				"RateLimit-Reset":     "2",
				"Retry-After":         "1",
			},
		},
		{
			name: "concurrency: no window",
			in:   limiter.Result{Result: bucket.Result{Allowed: true, Limit: 4, Remaining: 4}, Policy: "uploads", Quota: 4, Burst: 4},
			want: map[string]string{"RateLimit-Policy": `"uploads";q=4`, "RateLimit-Limit": "4"},
		},
	} {
		h := http.Header{}
		setRateLimitHeaders(h, []limiter.Result{tc.in})
		for k, v := range tc.want {
			if got := h.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", tc.name, k, got, v)
			}
		}
	}
}

// A token bucket of 100 a minute with a burst of 200 advertises its quota,
// 100 a minute, and its burst separately.
func TestHTTPHeadersQuotaAndBurst(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	a := post(t, ts.Server, `{"checks":[{"key":"k","limit":100,"period":"1m","burst":200}]}`)
	if a.status != http.StatusOK {
		t.Fatalf("got %s", a)
	}
	wantHeaders(t, a, map[string]string{
		"RateLimit-Policy":    `"default";q=100;w=60;sluice-burst=200`,
		"RateLimit":           `"default";r=199;t=1`,
		"RateLimit-Limit":     "100",
		"RateLimit-Remaining": "199",
	})
}

func TestHTTPBadInput(t *testing.T) {
	ts := newTestServer(t, serverOpts{policies: testPolicies})
	many := `{"checks":[` + strings.Repeat(`{"key":"k","limit":1,"period":"1s"},`, limiter.MaxItems) + `{"key":"k","limit":1,"period":"1s"}]}`
	cases := []struct {
		name, body, field string
	}{
		{"negative limit", `{"checks":[{"key":"k","limit":-1,"period":"1m"}]}`, "checks[0].limit"},
		{"zero limit", `{"checks":[{"key":"k","limit":0,"period":"1m"}]}`, "checks[0].limit"},
		{"limit not a number", `{"checks":[{"key":"k","limit":"x","period":"1m"}]}`, "checks[0].limit"},
		{"limit fractional", `{"checks":[{"key":"k","limit":1.5,"period":"1m"}]}`, "checks[0].limit"},
		{"empty key", `{"checks":[{"key":"","limit":1,"period":"1m"}]}`, "checks[0].key"},
		{"missing key", `{"checks":[{"limit":1,"period":"1m"}]}`, "checks[0].key"},
		{"long key", `{"checks":[{"key":"` + strings.Repeat("k", limiter.MaxKeyBytes+1) + `","limit":1,"period":"1m"}]}`, "checks[0].key"},
		{"zero period", `{"checks":[{"key":"k","limit":1,"period":"0s"}]}`, "checks[0].period"},
		{"missing period", `{"checks":[{"key":"k","limit":1}]}`, "checks[0].period"},
		{"long period", `{"checks":[{"key":"k","limit":1,"period":"367d"}]}`, "checks[0].period"},
		{"bad period", `{"checks":[{"key":"k","limit":1,"period":"abc"}]}`, "checks[0].period"},
		{"numeric period", `{"checks":[{"key":"k","limit":1,"period":60}]}`, "checks[0].period"},
		{"negative cost", `{"checks":[{"key":"k","limit":1,"period":"1m","cost":-1}]}`, "checks[0].cost"},
		{"cost over capacity", `{"checks":[{"key":"k","limit":1,"period":"1m","cost":2}]}`, "checks[0].cost"},
		{"negative burst", `{"checks":[{"key":"k","limit":1,"period":"1m","burst":-1}]}`, "checks[0].burst"},
		{"unknown algorithm", `{"checks":[{"key":"k","limit":1,"period":"1m","algorithm":"leaky"}]}`, "checks[0].algorithm"},
		{"concurrency cost", `{"checks":[{"key":"k","limit":1,"algorithm":"concurrency"}]}`, "checks[0].algorithm"},
		{"unknown failure mode", `{"checks":[{"key":"k","limit":1,"period":"1m","failure_mode":"open"}]}`, "checks[0].failure_mode"},
		{"unknown policy", `{"checks":[{"key":"k","policy":"nope"}]}`, "checks[0].policy"},
		{"policy and limit", `{"checks":[{"key":"k","policy":"login","limit":5}]}`, "checks[0].policy"},
		{"neither policy nor limit", `{"checks":[{"key":"k"}]}`, "checks[0].policy"},
		{"second item", `{"checks":[{"key":"k","policy":"login"},{"key":"k","limit":-1,"period":"1m"}]}`, "checks[1].limit"},
		{"second item type", `{"checks":[{"key":"k","policy":"login"},{"key":"k","limit":1,"period":"1m","cost":"1"}]}`, "checks[1].cost"},
		{"unknown item field", `{"checks":[{"key":"k","limit":1,"period":"1m","foo":1}]}`, "checks[0].foo"},
		{"unknown top field", `{"checks":[{"key":"k","limit":1,"period":"1m"}],"foo":1}`, "foo"},
		{"item not an object", `{"checks":[5]}`, "checks[0]"},
		{"checks not an array", `{"checks":{}}`, "checks"},
		{"no checks", `{"checks":[]}`, "checks"},
		{"null checks", `{}`, "checks"},
		{"too many checks", many, "checks"},
		{"malformed", `{"checks":[{"key":"k",}]}`, "body"},
		{"truncated", `{"checks":[{"key":"k"`, "body"},
		{"not JSON", `hello`, "body"},
		{"array", `[{"key":"k"}]`, "body"},
		{"trailing data", `{"checks":[{"key":"k","limit":1,"period":"1m"}]} {}`, "body"},
		{"duplicate key", `{"checks":[{"key":"a","limit":1,"period":"1m","key":"b"}]}`, "checks[0].key"},
		{"case-folded duplicate key", `{"checks":[{"key":"a","limit":1,"period":"1m","KEY":"b"}]}`, "checks[0].KEY"},
		{"escaped duplicate key", `{"checks":[{"key":"a","limit":1,"period":"1m","\u006bey":"b"}]}`, "checks[0].key"},
		{"kelvin-sign duplicate key", `{"checks":[{"key":"a","limit":1,"period":"1m","\u212aey":"b"}]}`, "checks[0].\u212aey"},
		{"duplicate in second item", `{"checks":[{"key":"k","policy":"login"},{"key":"k","policy":"login","Policy":"api"}]}`, "checks[1].Policy"},
		{"duplicate checks", `{"checks":[{"key":"k","policy":"login"}],"Checks":[{"key":"k","policy":"api"}]}`, "Checks"},
		{"long unknown field", `{"checks":[{"key":"k","` + strings.Repeat("f", 3000) + `":1}]}`, "checks[0]." + strings.Repeat("f", 64) + "…(3000 bytes)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantBadRequest(t, post(t, ts.Server, tc.body), tc.field)
		})
	}
	// Nothing above consumed anything: every item is validated first.
	a := post(t, ts.Server, `{"checks":[{"key":"k","policy":"login","cost":2}]}`)
	if a.status != http.StatusOK {
		t.Errorf("login after bad requests: %s", a)
	}
}

func wantBadRequest(t *testing.T, a answer, field string) {
	t.Helper()
	if a.status != http.StatusBadRequest {
		t.Fatalf("got %s, want 400 naming %s", a, field)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	e := decode[errorJSON](t, a)
	if e.Field != field || !strings.HasPrefix(e.Error, field+": ") {
		t.Errorf("error = %+v, want field %q", e, field)
	}
}

func TestHTTPInlineDisabled(t *testing.T) {
	ts := newTestServer(t, serverOpts{policies: "allow_inline: false\n" + testPolicies})
	wantBadRequest(t, post(t, ts.Server, `{"checks":[{"key":"k","limit":1,"period":"1m"}]}`), "checks[0].limit")
	if a := post(t, ts.Server, `{"checks":[{"key":"k","policy":"api"}]}`); a.status != http.StatusOK {
		t.Errorf("policy check: %s", a)
	}
}

func TestHTTPQueryBadInput(t *testing.T) {
	ts := newTestServer(t, serverOpts{policies: testPolicies})
	cases := []struct {
		name, path, field string
		hdr               []string
	}{
		{"no key", "/v1/check?policy=login", "key", nil},
		{"empty key", "/v1/check?key=&policy=login", "key", nil},
		{"missing key header", "/v1/check?key_header=X-Forwarded-For&policy=login", "key_header", nil},
		{"blank key header", "/v1/check?key_header=X-Forwarded-For&policy=login", "key_header", []string{"X-Forwarded-For", " , 10.0.0.1"}},
		{"long key header", "/v1/check?key_header=X-Key&policy=login", "key_header", []string{"X-Key", strings.Repeat("k", 1025)}},
		{"key and key header", "/v1/check?key=k&key_header=X-Key&policy=login", "key_header", []string{"X-Key", "j"}},
		{"empty key and key header", "/v1/check?key=&key_header=X-Key&policy=login", "key_header", []string{"X-Key", "j"}},
		{"usage key and key header", "/v1/usage?key=k&key_header=X-Key&policy=login", "key_header", []string{"X-Key", "j"}},
		{"bad limit", "/v1/check?key=k&limit=x&period=1m", "limit", nil},
		{"negative limit", "/v1/check?key=k&limit=-1&period=1m", "limit", nil},
		{"bad period", "/v1/check?key=k&limit=1&period=soon", "period", nil},
		{"long period", "/v1/check?key=k&limit=1&period=400d", "period", nil},
		{"bad cost", "/v1/check?key=k&policy=login&cost=1.5", "cost", nil},
		{"negative cost", "/v1/check?key=k&policy=login&cost=-1", "cost", nil},
		{"unknown algorithm", "/v1/check?key=k&limit=1&period=1m&algorithm=gcra", "algorithm", nil},
		{"unknown policy", "/v1/check?key=k&policy=nope", "policy", nil},
		{"policy and limit", "/v1/check?key=k&policy=login&limit=1", "policy", nil},
		{"unknown param", "/v1/check?key=k&policy=login&polcy=x", "polcy", nil},
		{"repeated param", "/v1/check?key=k&key=j&policy=login", "key", nil},
		{"param with no name", "/v1/check?key=k&policy=login&=1", "query", nil},
		{"bad deny status", "/v1/check?key=k&policy=login&deny_status=500", "deny_status", nil},
		{"bad escape", "/v1/check?key=%zz", "query", nil},
		{"usage cost", "/v1/usage?key=k&policy=login&cost=1", "cost", nil},
		{"usage deny status", "/v1/usage?key=k&policy=login&deny_status=403", "deny_status", nil},
		{"usage no key", "/v1/usage?policy=login", "key", nil},
		{"usage unknown policy", "/v1/usage?key=k&policy=nope", "policy", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantBadRequest(t, do(t, ts.Server, http.MethodGet, tc.path, "", tc.hdr...), tc.field)
		})
	}
	// A JSON body takes only deny_status from the query string.
	wantBadRequest(t, do(t, ts.Server, http.MethodPost, "/v1/check?key=k",
		`{"checks":[{"key":"k","policy":"login"}]}`), "key")
	// An empty POST with no query string is not a check.
	wantBadRequest(t, do(t, ts.Server, http.MethodPost, "/v1/check", ""), "body")
}

func TestHTTPBodyTooLarge(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	body := `{"checks":[{"key":"` + strings.Repeat("k", DefaultMaxBodyBytes) + `"}]}`
	a := post(t, ts.Server, body)
	if a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("got %d, want 413", a.status)
	}
	if e := decode[errorJSON](t, a); e.Field != "body" {
		t.Errorf("error = %+v", e)
	}
	// Without a Content-Length too (chunked).
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/check", io.MultiReader(strings.NewReader(body)))
	req.ContentLength = -1
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: got %d, want 413", resp.StatusCode)
	}
}

func TestHTTPMethodsAndRoutes(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodPut, "/v1/check", "GET, HEAD, POST"},
		{http.MethodDelete, "/v1/check", "GET, HEAD, POST"},
		{http.MethodPost, "/v1/usage", "GET, HEAD"},
		{http.MethodPost, "/healthz", "GET, HEAD"},
		{http.MethodPost, "/readyz", "GET, HEAD"},
		{http.MethodPost, "/metrics", "GET, HEAD"},
	} {
		a := do(t, ts.Server, tc.method, tc.path, "")
		if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %s, Allow %q", tc.method, tc.path, a, a.header.Get("Allow"))
		}
		if e := decode[errorJSON](t, a); e.Error == "" {
			t.Errorf("%s %s: empty error", tc.method, tc.path)
		}
	}
	a := do(t, ts.Server, http.MethodGet, "/v2/nothing", "")
	if a.status != http.StatusNotFound || decode[errorJSON](t, a).Error == "" {
		t.Errorf("unknown route: %s", a)
	}
}

func TestHTTPUsageDoesNotConsume(t *testing.T) {
	ts := newTestServer(t, serverOpts{policies: testPolicies})
	for i := 0; i < 2; i++ {
		post(t, ts.Server, `{"checks":[{"key":"u","limit":10,"period":"10s"}]}`)
	}
	for i := 0; i < 3; i++ {
		a := do(t, ts.Server, http.MethodGet, "/v1/usage?key=u&limit=10&period=10s", "")
		if a.status != http.StatusOK {
			t.Fatalf("usage: %s", a)
		}
		u := decode[usageJSON](t, a)
		if u.Key != "u" || u.Limit != 10 || u.Remaining != 8 || u.Used != 2 || !u.Allowed {
			t.Errorf("usage %d = %+v", i, u)
		}
		wantHeaders(t, a, map[string]string{"RateLimit": `"default";r=8;t=2`, "RateLimit-Policy": `"default";q=10;w=10`})
	}
	a := post(t, ts.Server, `{"checks":[{"key":"u","limit":10,"period":"10s"}]}`)
	if r := decode[checkResponseJSON](t, a).Results[0]; r.Remaining != 7 {
		t.Errorf("check after usage: remaining %d, want 7", r.Remaining)
	}

	// An exhausted policy key: usage still answers 200.
	post(t, ts.Server, `{"checks":[{"key":"v","policy":"login","cost":2}]}`)
	a = do(t, ts.Server, http.MethodGet, "/v1/usage?key=v&policy=login", "")
	if a.status != http.StatusOK {
		t.Fatalf("usage: %s", a)
	}
	// At 0 remaining, "allowed" is false: a check of 1 would be denied.
	if u := decode[usageJSON](t, a); u.Policy != "login" || u.Remaining != 0 || u.Used != 2 || u.Allowed {
		t.Errorf("usage = %+v, want remaining 0, used 2, allowed false", u)
	}
	// Usage of an unseen key: everything left.
	a = do(t, ts.Server, http.MethodGet, "/v1/usage?key=new&policy=api", "")
	if u := decode[usageJSON](t, a); a.status != http.StatusOK || u.Remaining != 200 || u.Used != 0 {
		t.Errorf("usage = %s", a)
	}
}

func TestHTTPAuthRequest(t *testing.T) {
	ts := newTestServer(t, serverOpts{policies: testPolicies})
	const path = "/v1/check?policy=login&key_header=X-Forwarded-For"
	xff := []string{"X-Forwarded-For", " 203.0.113.7 , 10.0.0.1"}
	// nginx with proxy_method GET, then without (a body-less POST).
	if a := do(t, ts.Server, http.MethodGet, path, "", xff...); a.status != http.StatusOK {
		t.Fatalf("first: %s", a)
	}
	if a := do(t, ts.Server, http.MethodPost, path, "", xff...); a.status != http.StatusOK {
		t.Fatalf("second: %s", a)
	}
	a := do(t, ts.Server, http.MethodGet, path, "", xff...)
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("third: %s", a)
	}
	wantHeaders(t, a, map[string]string{"Retry-After": "60", "RateLimit": `"login";r=0;t=60`})
	// The key was the first X-Forwarded-For address, trimmed.
	u := decode[usageJSON](t, do(t, ts.Server, http.MethodGet, "/v1/usage?key=203.0.113.7&policy=login", ""))
	if u.Used != 2 {
		t.Errorf("usage of 203.0.113.7 = %+v", u)
	}
	// Another client is not affected.
	if a := do(t, ts.Server, http.MethodGet, path, "", "X-Forwarded-For", "198.51.100.1"); a.status != http.StatusOK {
		t.Errorf("other key: %s", a)
	}
	// HEAD works too (no body).
	if a := do(t, ts.Server, http.MethodHead, path, "", xff...); a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "60" {
		t.Errorf("HEAD: %s", a)
	}
	// Inline limits in the query string, cost included.
	const inline = "/v1/check?key=k&limit=5&period=1m&algorithm=sliding_window&cost=5&failure_mode=deny"
	if a := do(t, ts.Server, http.MethodGet, inline, ""); a.status != http.StatusOK {
		t.Fatalf("inline: %s", a)
	}
	a = do(t, ts.Server, http.MethodGet, inline, "")
	if a.status != http.StatusTooManyRequests {
		t.Fatalf("inline again: %s", a)
	}
	wantHeaders(t, a, map[string]string{"RateLimit-Policy": `"default";q=5;w=60`})
}

func TestHTTPDenyStatus(t *testing.T) {
	ts := newTestServer(t, serverOpts{policies: testPolicies})
	const path = "/v1/check?key=k&policy=login&deny_status=403"
	for i := 0; i < 2; i++ {
		if a := do(t, ts.Server, http.MethodGet, path, ""); a.status != http.StatusOK {
			t.Fatalf("check %d: %s", i, a)
		}
	}
	a := do(t, ts.Server, http.MethodGet, path, "")
	if a.status != http.StatusForbidden {
		t.Fatalf("got %s, want 403", a)
	}
	wantHeaders(t, a, map[string]string{"Retry-After": "60", "RateLimit": `"login";r=0;t=60`})
	if r := decode[checkResponseJSON](t, a).Results[0]; r.Allowed {
		t.Errorf("result = %+v", r)
	}
	// 401 on a JSON POST.
	a = do(t, ts.Server, http.MethodPost, "/v1/check?deny_status=401", `{"checks":[{"key":"k","policy":"login"}]}`)
	if a.status != http.StatusUnauthorized {
		t.Errorf("got %s, want 401", a)
	}
}

func TestHTTPItemError(t *testing.T) {
	// A store with no room refuses new keys: the item carries an error
	// and the answer is 503.
	ts := newTestServer(t, serverOpts{store: store.Config{Shards: 1, MaxBytes: 1}})
	a := post(t, ts.Server, `{"checks":[{"key":"k","limit":5,"period":"1m"}]}`)
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("got %s, want 503", a)
	}
	r := decode[checkResponseJSON](t, a).Results[0]
	if r.Allowed || r.Error == nil || r.Error.Code != "resource_exhausted" || r.Error.Message == "" {
		t.Errorf("result = %+v (error %+v)", r, r.Error)
	}
	if h := a.header.Get("RateLimit"); h != "" {
		t.Errorf("RateLimit = %q on a failed item", h)
	}
	a = do(t, ts.Server, http.MethodGet, "/v1/usage?key=k&limit=5&period=1m", "")
	if a.status != http.StatusOK {
		// A read never inserts a key, so it never fails for room.
		t.Errorf("usage: %s", a)
	}
}

// stubChecker answers with a fixed error or results.
type stubChecker struct {
	err     error
	results []limiter.Result
}

func (s stubChecker) Check(ctx context.Context, reqs []limiter.Request, out []limiter.Result) ([]limiter.Result, error) {
	if s.err != nil {
		return out[:0], s.err
	}
	return append(out[:0], s.results...), nil
}

func TestHTTPCheckerErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		field  string
	}{
		{errors.New("boom"), http.StatusInternalServerError, ""},
		{context.DeadlineExceeded, http.StatusGatewayTimeout, ""},
		{&limiter.FieldError{Index: -1, Field: "items", Reason: "too many", Err: limiter.ErrInvalid}, http.StatusBadRequest, "checks"},
		{fmt.Errorf("wrapped: %w", limiter.ErrUnknownPolicy), http.StatusBadRequest, "checks"},
	} {
		srv := httptest.NewServer(mustHandler(t, HTTPConfig{Checker: stubChecker{err: tc.err}}))
		a := do(t, srv, http.MethodPost, "/v1/check", `{"checks":[{"key":"k","limit":1,"period":"1s"}]}`)
		srv.Close()
		if a.status != tc.status {
			t.Errorf("%v: got %s, want %d", tc.err, a, tc.status)
			continue
		}
		if e := decode[errorJSON](t, a); e.Field != tc.field || e.Error == "" || strings.Contains(e.Error, "boom") {
			t.Errorf("%v: error = %+v", tc.err, e)
		}
	}

	// An item error beats a deny: 503.
	srv := httptest.NewServer(mustHandler(t, HTTPConfig{Checker: stubChecker{results: []limiter.Result{
		{Result: bucket.Result{Allowed: false, Limit: 1, RetryAfter: time.Second}, Source: limiter.SourceOwner},
		{Err: fmt.Errorf("x: %w", store.ErrFull)},
	}}}))
	defer srv.Close()
	a := do(t, srv, http.MethodPost, "/v1/check", `{"checks":[{"key":"k","limit":1,"period":"1s"},{"key":"j","limit":1,"period":"1s"}]}`)
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("got %s, want 503", a)
	}
	wantHeaders(t, a, map[string]string{"Retry-After": "1", "RateLimit": `"default";r=0;t=0`})
	// The wrong number of results for a usage read is an internal error.
	if a := do(t, srv, http.MethodGet, "/v1/usage?key=k&limit=1&period=1s", ""); a.status != http.StatusInternalServerError {
		t.Errorf("usage with 2 results: %s", a)
	}
}

func TestHTTPHealthAndMetrics(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	a := do(t, ts.Server, http.MethodGet, "/healthz", "")
	if a.status != http.StatusOK || strings.TrimSpace(string(a.body)) != `{"status":"ok"}` {
		t.Errorf("healthz: %s", a)
	}
	a = do(t, ts.Server, http.MethodGet, "/readyz", "")
	if a.status != http.StatusOK || strings.TrimSpace(string(a.body)) != `{"status":"ready"}` {
		t.Errorf("readyz: %s", a)
	}
	ts.ready.Store(false)
	a = do(t, ts.Server, http.MethodGet, "/readyz", "")
	if a.status != http.StatusServiceUnavailable || strings.TrimSpace(string(a.body)) != `{"status":"not ready"}` {
		t.Errorf("readyz not ready: %s", a)
	}
	post(t, ts.Server, `{"checks":[{"key":"k","limit":1,"period":"1s"}]}`)
	a = do(t, ts.Server, http.MethodGet, "/metrics", "")
	if a.status != http.StatusOK {
		t.Fatalf("metrics: %d", a.status)
	}
	for _, want := range []string{
		`sluice_checks_total{algorithm="token_bucket",policy="",result="allowed"} 1`,
		`sluice_request_duration_seconds_count{method="check",transport="http"} 1`,
	} {
		if !strings.Contains(string(a.body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// No Gatherer: /metrics is a 404; no Ready: always ready.
	srv := httptest.NewServer(mustHandler(t, HTTPConfig{Checker: stubChecker{}}))
	defer srv.Close()
	if a := do(t, srv, http.MethodGet, "/metrics", ""); a.status != http.StatusNotFound {
		t.Errorf("metrics without gatherer: %s", a)
	}
	if a := do(t, srv, http.MethodGet, "/readyz", ""); a.status != http.StatusOK {
		t.Errorf("readyz without Ready: %s", a)
	}
}

func TestNewHTTPHandlerNeedsChecker(t *testing.T) {
	if _, err := NewHTTPHandler(HTTPConfig{}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Checker") {
		t.Errorf("err = %v, want ErrInvalidConfig naming Checker", err)
	}
}

func TestNewGRPCNeedsService(t *testing.T) {
	if _, err := NewGRPC(GRPCConfig{}); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Service") {
		t.Errorf("err = %v, want ErrInvalidConfig naming Service", err)
	}
}

// mustHandler is NewHTTPHandler for a config known to be valid.
func mustHandler(t testing.TB, cfg HTTPConfig) http.Handler {
	t.Helper()
	h, err := NewHTTPHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func BenchmarkDecodeCheckBody(b *testing.B) {
	body := []byte(`{"checks":[` + strings.Repeat(`{"key":"user:42","limit":100,"period":"1m","cost":1},`, 9) +
		`{"key":"user:42","policy":"api"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, herr := decodeCheckBody(body); herr != nil {
			b.Fatal(herr)
		}
	}
}
