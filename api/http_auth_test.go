package api

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
)

// With RequireClientCert, only the probes answer a request without a
// verified client certificate; everything else is a 401 with a JSON body.
// (The handshake's side, over real TLS, is tested in node.)
func TestHTTPRequireClientCert(t *testing.T) {
	allowed := stubChecker{results: []limiter.Result{{Result: bucket.Result{Allowed: true, Limit: 10, Remaining: 9}, Source: limiter.SourceOwner}}}
	h := mustHandler(t, HTTPConfig{Checker: allowed, Gatherer: prometheus.NewRegistry(), RequireClientCert: true})
	open := mustHandler(t, HTTPConfig{Checker: allowed, Gatherer: prometheus.NewRegistry()})

	cert := &x509.Certificate{}
	conns := map[string]*tls.ConnectionState{
		"plaintext":                     nil,
		"TLS without a certificate":     {},
		"an unverified certificate":     {PeerCertificates: []*x509.Certificate{cert}},
		"a verified client certificate": {PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}},
	}
	paths := map[string]int{ // path -> status with a verified certificate
		"/healthz":                           http.StatusOK,
		"/readyz":                            http.StatusOK,
		"/v1/check?key=k&limit=10&period=1m": http.StatusOK,
		"/v1/usage?key=k&limit=10&period=1m": http.StatusOK,
		"/metrics":                           http.StatusOK,
		"/nope":                              http.StatusNotFound,
		"/healthz/../v1/check":               http.StatusNotFound,
	}
	for conn, cs := range conns {
		for path, withCert := range paths {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.TLS = cs
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			want := withCert
			probe := path == "/healthz" || path == "/readyz"
			if conn != "a verified client certificate" && !probe {
				want = http.StatusUnauthorized
			}
			if rec.Code != want {
				t.Errorf("%s, GET %s: %d %s, want %d", conn, path, rec.Code, rec.Body, want)
			}
			if rec.Code == http.StatusUnauthorized {
				var body errorJSON
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || !strings.Contains(body.Error, "client certificate is required") {
					t.Errorf("%s, GET %s: body %q (%v), want a JSON error saying a client certificate is required", conn, path, rec.Body, err)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("%s, GET %s: Content-Type %q", conn, path, ct)
				}
			}
			// Without RequireClientCert, nothing is asked of the connection.
			rec = httptest.NewRecorder()
			open.ServeHTTP(rec, req)
			if rec.Code != withCert {
				t.Errorf("without RequireClientCert, %s, GET %s: %d, want %d", conn, path, rec.Code, withCert)
			}
		}
	}
}
