package tlsconfig_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/internal/tlsconfig"
)

// TestPeerAuthOnASharedPort serves a guarded service on a listener that
// accepts client certificates of both the public and the peer CA, as a
// port shared by the public API and the peer service would: only peer
// certificates pass the rule, whatever the listener accepted.
func TestPeerAuthOnASharedPort(t *testing.T) {
	dir := t.TempDir()
	public, peerCA := testcerts.NewCA(t, "public"), testcerts.NewCA(t, "peer")
	testcerts.WritePair(t, dir, "tls", peerCA.Peer(t, "node", "sluice-peer"))
	// The listener trusts both CAs; the rule, the peer CA only.
	testcerts.Write(t, dir, "ca.crt", bytes.Join([][]byte{public.PEM, peerCA.PEM}, nil))
	listener, err := tlsconfig.New(files(dir))
	if err != nil {
		t.Fatal(err)
	}
	testcerts.Write(t, dir, "peer-ca.crt", peerCA.PEM)
	rule, err := tlsconfig.New(tlsconfig.Config{
		Cert: tlsconfig.File{Path: dir + "/tls.crt"}, Key: tlsconfig.File{Path: dir + "/tls.key"},
		CA: tlsconfig.File{Path: dir + "/peer-ca.crt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := &tlsconfig.PeerAuth{Source: rule, Service: "grpc.health.v1.Health"}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsconfig.ServerConfig(listener, tls.RequireAndVerifyClientCert, "h2"))),
		grpc.ChainUnaryInterceptor(auth.Unary()), grpc.ChainStreamInterceptor(auth.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	call := func(pair testcerts.Pair) (unary, stream error) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(peerCA.PEM)
		cert, err := tls.X509KeyPair(pair.Cert, pair.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &tls.Config{RootCAs: pool, ServerName: "sluice-peer", Certificates: []tls.Certificate{cert}}
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hc := healthpb.NewHealthClient(cc)
		_, unary = hc.Check(ctx, &healthpb.HealthCheckRequest{})
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		return unary, err
	}
	if u, s := call(peerCA.Peer(t, "n1", "sluice-peer")); u != nil || s != nil {
		t.Fatalf("a peer: %v, %v; want admitted", u, s)
	}
	for name, tc := range map[string]struct {
		pair testcerts.Pair
		why  string
	}{
		"public CA, with the peer SAN": {public.Peer(t, "forged", "sluice-peer"), "not issued by the peer CA"},
		"public CA client":             {public.Client(t, "svc"), `no DNS SAN "sluice-peer"`},
		"peer CA, without the SAN":     {peerCA.Client(t, "other"), `no DNS SAN "sluice-peer"`},
	} {
		u, s := call(tc.pair)
		if status.Code(u) != codes.PermissionDenied || status.Code(s) != codes.PermissionDenied {
			t.Errorf("%s: %v, %v; want PermissionDenied", name, u, s)
			continue
		}
		if !strings.Contains(u.Error(), tc.why) {
			t.Errorf("%s: %v, want it to say %q", name, u, tc.why)
		}
	}
}

// A caller without TLS, or with no caller information, is refused.
func TestPeerAuthWithoutTLS(t *testing.T) {
	auth := &tlsconfig.PeerAuth{}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}})
	if err := auth.Authorize(ctx); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "not over TLS") {
		t.Fatalf("plaintext caller: %v", err)
	}
	if err := auth.Authorize(context.Background()); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("no caller: %v", err)
	}
}
