package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rl/sluice/limiter"
)

// newRLSJSONServer serves the HTTP API with POST /json over the RLS of h,
// with a body limit of maxBody bytes (0: the default).
func newRLSJSONServer(t *testing.T, h *rlsHarness, maxBody int64) *httptest.Server {
	t.Helper()
	lim, err := limiter.New(limiter.Config{NodeName: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	srv := httptest.NewServer(mustHandler(t, HTTPConfig{Checker: lim, RLS: h.s, MaxBodyBytes: maxBody}))
	t.Cleanup(srv.Close)
	return srv
}

// POST /json answers what ShouldRateLimit answers, in protobuf JSON: 200
// while the descriptor is under its limit of 2 a minute, then 429 with
// OVER_LIMIT, the same response the gRPC call gives for the next request.
func TestHTTPRLSJSON(t *testing.T) {
	h := newRLSHarness(t, rlsConfig)
	srv := newRLSJSONServer(t, h, 0)
	const body = `{"domain":"web","descriptors":[{"entries":[{"key":"path","value":"/login"}]}]}`
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		a := do(t, srv, http.MethodPost, "/json", body)
		if a.status != want || a.header.Get("Content-Type") != "application/json" {
			t.Fatalf("call %d: %s (%s), want %d", i+1, a, a.header.Get("Content-Type"), want)
		}
		var resp rlsv3.RateLimitResponse
		if err := protojson.Unmarshal(a.body, &resp); err != nil {
			t.Fatalf("call %d: the body is not a RateLimitResponse: %v\n%s", i+1, err, a.body)
		}
		if i == 2 {
			if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() != 2 {
				t.Fatalf("over the limit: %v", &resp)
			}
			var req rlsv3.RateLimitRequest
			if err := protojson.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			grpcResp, err := h.s.ShouldRateLimit(context.Background(), &req)
			if err != nil || !proto.Equal(grpcResp, &resp) {
				t.Fatalf("gRPC answer %v (%v), /json answered %v", grpcResp, err, &resp)
			}
		}
	}
}

// Bad input to POST /json is a 400 (405, 413) with a JSON body naming
// the field, never a default.
func TestHTTPRLSJSONBadInput(t *testing.T) {
	h := newRLSHarness(t, rlsConfig)
	srv := newRLSJSONServer(t, h, 256)
	for _, tc := range []struct {
		name, method, body string
		status             int
		field              string
	}{
		{"not JSON", http.MethodPost, `domain=web`, 400, "body"},
		{"empty body", http.MethodPost, ``, 400, "body"},
		{"unknown field", http.MethodPost, `{"domain":"web","descriptor":[]}`, 400, "body"},
		{"wrong type", http.MethodPost, `{"domain":7}`, 400, "body"},
		{"duplicate field", http.MethodPost, `{"domain":"web","domain":"api","descriptors":[{"entries":[{"key":"path"}]}]}`, 400, "body"},
		{"trailing data", http.MethodPost, `{"domain":"web"} {}`, 400, "body"},
		{"hits_addend negative", http.MethodPost, `{"domain":"web","descriptors":[{"entries":[{"key":"path"}]}],"hitsAddend":-1}`, 400, "body"},
		{"no domain", http.MethodPost, `{"descriptors":[{"entries":[{"key":"path"}]}]}`, 400, "domain"},
		{"no descriptors", http.MethodPost, `{"domain":"web"}`, 400, "descriptors"},
		{"override unit", http.MethodPost, `{"domain":"web","descriptors":[{"entries":[{"key":"path"}],"limit":{"requestsPerUnit":1,"unit":99}}]}`, 400, "descriptors[0].limit.unit"},
		{"too large", http.MethodPost, `{"domain":"` + strings.Repeat("w", 300) + `"}`, 413, "body"},
		{"GET", http.MethodGet, ``, 405, ""},
	} {
		a := do(t, srv, tc.method, "/json", tc.body)
		if a.status != tc.status {
			t.Errorf("%s: %s, want %d", tc.name, a, tc.status)
			continue
		}
		if e := decode[errorJSON](t, a); e.Error == "" || e.Field != tc.field {
			t.Errorf("%s: %s, want an error naming %q", tc.name, a, tc.field)
		}
	}
}

// Without an RLS, /json is not served.
func TestHTTPRLSJSONNotEnabled(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	if a := do(t, ts.Server, http.MethodPost, "/json", `{"domain":"web"}`); a.status != http.StatusNotFound {
		t.Errorf("/json without an RLS: %s, want 404", a)
	}
}
