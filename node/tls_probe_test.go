package node_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/testcerts"
)

// httpsGet is one GET over HTTPS with cfg, on a connection of its own:
// the status and body, or the error (a refused handshake).
func httpsGet(t testing.TB, cfg *tls.Config, addr, path string) (int, []byte, error) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + addr + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// tlsRefusal sends one HTTP/1.1 GET over TLS with cfg and reads the
// answer: the error that ends it. (In TLS 1.3 the server's verdict on a
// client certificate arrives after the client's handshake, as an alert.)
func tlsRefusal(t testing.TB, cfg *tls.Config, addr, path string) error {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"http/1.1"}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	b, err := io.ReadAll(conn)
	if err == nil {
		return errors.New("answered: " + string(b))
	}
	return err
}

// With public mTLS, the HTTP listener answers the kubelet's probes
// without a client certificate, and nothing else: /v1/check, /v1/usage and
// /metrics answer 401 (JSON) without one; an untrusted certificate fails
// the handshake on every path; a good one passes everywhere. The gRPC port
// stays strict, its health service included.
func TestTLSProbesWithoutClientCert(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, p.mtls)
	stranger := testcerts.NewCA(t, "stranger").Client(t, "stranger")
	var (
		none      = testcerts.ClientConfig(t, p.public.PEM, nil)
		untrusted = testcerts.ClientConfig(t, p.public.PEM, &stranger)
		good      = testcerts.ClientConfig(t, p.public.PEM, &p.client)
	)
	// Go's client sends a certificate only if its issuer is among the CAs
	// the server names; others (curl, an attacker) send it anyway.
	untrusted.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &untrusted.Certificates[0], nil
	}
	probes := []string{"/healthz", "/readyz"}
	guarded := []string{"/v1/check?key=k&limit=10&period=1m", "/v1/usage?key=k&limit=10&period=1m", "/metrics", "/no-such-route"}

	for _, path := range probes {
		if code, body, err := httpsGet(t, none, n.HTTPAddr(), path); err != nil || code != http.StatusOK {
			t.Errorf("probe %s without a client certificate: %d %s, %v; want 200", path, code, body, err)
		}
	}
	for _, path := range guarded {
		code, body, err := httpsGet(t, none, n.HTTPAddr(), path)
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("%s without a client certificate: %d %s, %v; want 401", path, code, body, err)
			continue
		}
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e.Error, "client certificate is required") {
			t.Errorf("%s without a client certificate: body %q (%v), want the JSON error", path, body, err)
		}
	}
	for _, path := range append(probes, guarded...) {
		if code, _, err := httpsGet(t, untrusted, n.HTTPAddr(), path); err == nil {
			t.Errorf("%s with an untrusted certificate: answered %d, want a refused handshake", path, code)
		}
		if err := tlsRefusal(t, untrusted, n.HTTPAddr(), path); !strings.Contains(err.Error(), "remote error: tls: ") {
			t.Errorf("%s with an untrusted certificate: %v, want the server's TLS alert", path, err)
		}
	}
	for _, path := range append(probes, guarded[:3]...) {
		if code, body, err := httpsGet(t, good, n.HTTPAddr(), path); err != nil || code != http.StatusOK {
			t.Errorf("%s with a client certificate: %d %s, %v; want 200", path, code, body, err)
		}
	}

	// gRPC, grpc.health.v1 included, needs the certificate at the
	// handshake: the kubelet's gRPC probes could not pass, hence the
	// HTTPS probes.
	health := func(cfg *tls.Config) (healthpb.HealthCheckResponse_ServingStatus, error) {
		cc, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		return r.GetStatus(), err
	}
	if _, err := health(none); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC health without a client certificate: %v, want Unavailable (refused at the handshake)", err)
	}
	if s, err := health(good); err != nil || s != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health with a client certificate: %v, %v; want SERVING", s, err)
	}
	if err := checkOnce(tlsClient(t, none, n.GRPCAddr()), "k"); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC check without a client certificate: %v, want Unavailable", err)
	}
}
