package middleware_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/client/middleware"
)

// BenchmarkHTTP is the cost of the middleware per request, one and two
// rules, including the check on the local test node. Run:
// go test -run '^$' -bench HTTP -benchmem ./client/middleware/
func BenchmarkHTTP(b *testing.B) {
	lim := client.Limit{Limit: 1e9, Period: time.Second}
	ip, err := middleware.ClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		rules []middleware.HTTPRule
	}{
		{"ip", []middleware.HTTPRule{{Name: "b-ip", Key: ip, Limit: lim}}},
		{"ip+key", []middleware.HTTPRule{{Name: "b-ip2", Key: ip, Limit: lim}, {Name: "b-key", Key: middleware.Header("X-API-Key"), Limit: lim}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			mw, err := middleware.NewHTTP(middleware.HTTPConfig{Client: newClient(b), Rules: bc.rules, FailMode: middleware.FailClosed})
			if err != nil {
				b.Fatal(err)
			}
			h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.1:1"
			r.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.0.0.2")
			r.Header.Set("X-API-Key", "k")
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
