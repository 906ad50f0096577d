package middleware_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-rl/sluice/client/middleware"
)

// A request denied by one rule spends nothing on the others by default
// (all or nothing); with ChargeEveryRule every applicable rule spends.
func TestHTTPChargeEveryRule(t *testing.T) {
	c := newClient(t)
	for _, every := range []bool{false, true} {
		name := "atomic"
		if every {
			name = "every"
		}
		t.Run(name, func(t *testing.T) {
			ipRule, keyRule := "ip-"+name, "key-"+name
			limit, err := middleware.NewHTTP(middleware.HTTPConfig{
				Client: c, FailMode: middleware.FailClosed, ChargeEveryRule: every,
				Rules: []middleware.HTTPRule{
					{Name: ipRule, Key: middleware.Header("X-IP"), Limit: perMinute(10)},
					{Name: keyRule, Key: middleware.Header("X-Key"), Limit: perMinute(1)},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			do := func() int {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-IP", "1.2.3.4")
				r.Header.Set("X-Key", "k")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code
			}
			if code := do(); code != http.StatusOK {
				t.Fatalf("first request: %d", code)
			}
			if code := do(); code != http.StatusTooManyRequests {
				t.Fatalf("second request: %d, want 429 (the key's one a minute is spent)", code)
			}
			u, err := c.Usage(context.Background(), ipRule+":1.2.3.4", "", perMinute(10))
			if err != nil {
				t.Fatal(err)
			}
			want := int64(9) // only the allowed request spent
			if every {
				want = 8 // the denied one too
			}
			if u.Remaining != want {
				t.Fatalf("ip rule after an allowed and a denied request: %d left, want %d", u.Remaining, want)
			}
		})
	}
}
