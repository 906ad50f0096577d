package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-rl/sluice/client/middleware"
)

// The middleware answers with the headers Sluice's HTTP API sends for the
// same limit (an inline limit is the item "default" there, so the rule is
// named so here), request by request, allow and deny.
func TestHeadersAgreeWithHTTPAPI(t *testing.T) {
	mw, err := middleware.NewHTTP(middleware.HTTPConfig{Client: newClient(t), FailMode: middleware.FailClosed,
		Rules: []middleware.HTTPRule{{Name: "default", Key: middleware.Header("X-Key"), Limit: perMinute(2)}}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	names := []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"}
	for i, want := range []int{200, 200, 429} {
		resp, err := http.Get("http://" + sluiceHTTP() + "/v1/check?key=agree&limit=2&period=1m")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", "agree")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if resp.StatusCode != want || w.Code != want {
			t.Fatalf("request %d: API %d, middleware %d; want %d", i, resp.StatusCode, w.Code, want)
		}
		for _, name := range names {
			api, ours := resp.Header.Get(name), w.Header().Get(name)
			if api != ours {
				t.Errorf("request %d: %s: API %q, middleware %q", i, name, api, ours)
			}
			if api == "" && (name != "Retry-After" || want == 429) {
				t.Errorf("request %d: %s is missing", i, name)
			}
		}
	}
}
