package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"

	"github.com/sluice-rl/sluice/client/middleware"
)

// The middleware answers with the headers Sluice's HTTP API sends for the
// same limit (an inline limit is the item "default" there, so the rule is
// named so here), request by request, allow and deny; with a burst above
// the quota too (q is the quota, sluice-burst the burst).
func TestHeadersAgreeWithHTTPAPI(t *testing.T) {
	for _, tc := range []struct {
		name, key, query string
		limit            client.Limit
		codes            []int
	}{
		{"quota only", "agree", "limit=2&period=1m", perMinute(2), []int{200, 200, 429}},
		{"burst above the quota", "agree-burst", "limit=1&period=1m&burst=2", client.Limit{Limit: 1, Period: time.Minute, Burst: 2}, []int{200, 200, 429}},
	} {
		t.Run(tc.name, func(t *testing.T) { headersAgree(t, tc.key, tc.query, tc.limit, tc.codes) })
	}
}

func headersAgree(t *testing.T, key, query string, limit client.Limit, codes []int) {
	mw, err := middleware.NewHTTP(middleware.HTTPConfig{Client: newClient(t), FailMode: middleware.FailClosed,
		Rules: []middleware.HTTPRule{{Name: "default", Key: middleware.Header("X-Key"), Limit: limit}}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	names := []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"}
	for i, want := range codes {
		resp, err := http.Get("http://" + sluiceHTTP() + "/v1/check?key=" + key + "&" + query)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if resp.StatusCode != want || w.Code != want {
			t.Fatalf("request %d: API %d, middleware %d; want %d", i, resp.StatusCode, w.Code, want)
		}
		for _, name := range names {
			api, ours := resp.Header.Get(name), w.Header().Get(name)
			if !sameHeader(name, api, ours) {
				t.Errorf("request %d: %s: API %q, middleware %q", i, name, api, ours)
			}
			if api == "" && (name != "Retry-After" || want == 429) {
				t.Errorf("request %d: %s is missing", i, name)
			}
		}
		if limit.Burst > limit.Limit && !strings.Contains(w.Header().Get("RateLimit-Policy"), ";sluice-burst=2") {
			t.Errorf("request %d: RateLimit-Policy %q has no sluice-burst=2", i, w.Header().Get("RateLimit-Policy"))
		}
	}
}

// secondsParam is the delta-seconds parameter t of the RateLimit header.
var secondsParam = regexp.MustCompile(`;t=(\d+)`)

// sameHeader says whether the API's and the middleware's values of header
// name agree. The two answers are given at two moments of real time, so a
// delay in seconds (RateLimit-Reset, Retry-After, RateLimit's t) may
// differ by one when the moments straddle a second of its rounding (seen
// on a loaded machine: API "59", middleware "60"); all else is exact.
func sameHeader(name, api, ours string) bool {
	secs := func(s string) []int {
		var out []int
		switch name {
		case "RateLimit-Reset", "Retry-After":
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		case "RateLimit":
			for _, m := range secondsParam.FindAllStringSubmatch(s, -1) {
				n, _ := strconv.Atoi(m[1])
				out = append(out, n)
			}
		}
		return out
	}
	skeleton := func(s string) string {
		if name == "RateLimit-Reset" || name == "Retry-After" {
			return ""
		}
		return secondsParam.ReplaceAllString(s, ";t=N")
	}
	a, o := secs(api), secs(ours)
	if skeleton(api) != skeleton(ours) || len(a) != len(o) || (api == "") != (ours == "") {
		return false
	}
	for i := range a {
		if d := a[i] - o[i]; d < -1 || d > 1 {
			return false
		}
	}
	return true
}
