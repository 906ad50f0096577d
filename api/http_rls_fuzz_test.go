package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluice-rl/sluice/limiter"
)

// FuzzRLSJSON: any body POSTed to /json is answered with a RateLimitResponse
// in JSON (200, 429) or a JSON error naming a field (400, 413); never a
// panic, a 5xx or a body of another shape.
func FuzzRLSJSON(f *testing.F) {
	for _, s := range []string{
		`{"domain":"web","descriptors":[{"entries":[{"key":"path","value":"/login"}]}]}`,
		`{"domain":"web","descriptors":[{"entries":[{"key":"tenant","value":"t"},{"key":"ip","value":"1"}]}],"hitsAddend":3}`,
		`{"domain":"web","descriptors":[{"entries":[{"key":"path"}],"limit":{"requestsPerUnit":1,"unit":"MONTH"}}]}`,
		`{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"u"}],"hitsAddend":"18446744073709551615"}]}`,
		`{"domain":""}`,
		`{"domain":"web","domain":"x"}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	h := newRLSHarness(&testing.T{}, rlsConfig)
	lim, err := limiter.New(limiter.Config{NodeName: "n0"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(lim.Close)
	handler := mustHandler(f, HTTPConfig{Checker: lim, RLS: h.s, MaxBodyBytes: 64 << 10})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", bytes.NewReader(body)))
		switch rec.Code {
		case http.StatusOK, http.StatusTooManyRequests:
			var resp rlsv3.RateLimitResponse
			if err := protojson.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("%d with a body that is not a RateLimitResponse: %v\n%s", rec.Code, err, rec.Body)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			var e errorJSON
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Field == "" {
				t.Fatalf("%d without a JSON error naming a field: %s", rec.Code, rec.Body)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
