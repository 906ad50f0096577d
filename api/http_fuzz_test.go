package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHTTPCheck: any request to /v1/check or /v1/usage (a query string, a
// key header, a body) is answered in JSON with a status the API documents;
// a 400 names the field; never a panic.
func FuzzHTTPCheck(f *testing.F) {
	f.Add(false, "key=user:42&limit=10&period=1m", "", []byte(nil))
	f.Add(false, "policy=api&key_header=X-Key&deny_status=403", "10.0.0.1, 10.0.0.2", []byte(nil))
	f.Add(false, "key=k&limit=1&period=1s&algorithm=sliding_log&cost=2&failure_mode=deny", "", []byte(nil))
	f.Add(true, "deny_status=401", "", []byte(`{"checks":[{"key":"k","limit":5,"period":"1h","cost":0}]}`))
	f.Add(false, "key=k&limit=3&calendar=day&timezone=Asia/Kolkata&algorithm=fixed_window", "", []byte(nil))
	f.Add(true, "", "", []byte(`{"checks":[{"key":"k","limit":5,"calendar":"month","timezone":"Europe/Berlin"},{"key":"k","limit":5,"calendar":"fortnight","timezone":""}]}`))
	f.Add(true, "", "", []byte(`{"checks":[{"key":"k","policy":"login"},{"key":"k","limit":"x"}]}`))
	f.Add(false, "key=%zz&limit=1e3&period=-1s&burst=9223372036854775808", "", []byte(nil))
	f.Add(false, "key=k&key=j&policy=&usage", "", []byte(nil))
	f.Add(false, "key=k&key_header=X-Key&policy=api", "j", []byte(nil))
	f.Add(true, "", "", []byte(`{"checks":[{"key":"a","policy":"api","Key":"b"}]}`))
	f.Add(false, "policy="+strings.Repeat("p", 300)+"&key=k", "", []byte(nil))
	h, err := NewHTTPHandler(HTTPConfig{Checker: fuzzLimiter(f), MaxBodyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, post bool, query, keyHeader string, body []byte) {
		for _, path := range []string{"/v1/check", "/v1/usage"} {
			method := http.MethodGet
			if post {
				method = http.MethodPost
			}
			r := httptest.NewRequest(method, "/", strings.NewReader(string(body)))
			r.URL.Path, r.URL.RawQuery = path, query
			if keyHeader != "" {
				r.Header["X-Key"] = []string{keyHeader}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			switch w.Code {
			case http.StatusOK, http.StatusTooManyRequests, http.StatusUnauthorized, http.StatusForbidden,
				http.StatusServiceUnavailable, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
			case http.StatusBadRequest:
				var e errorJSON
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Field == "" || !strings.HasPrefix(e.Error, e.Field+": ") {
					t.Fatalf("%s %s?%s: 400 %s does not name a field", method, path, query, w.Body)
				}
				if len(e.Error) > 512 {
					t.Fatalf("%s %s?%s: a 400 of %d bytes quotes too much input", method, path, query, len(e.Error))
				}
			default:
				t.Fatalf("%s %s?%s: status %d %s", method, path, query, w.Code, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" || !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%s %s?%s: %q %s is not JSON", method, path, query, ct, w.Body)
			}
		}
	})
}
