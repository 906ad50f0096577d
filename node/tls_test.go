package node_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/transport"
)

// pki is a test's certificates: a public CA (server and client
// certificates of the public listeners) and a peer CA (the nodes'
// peer certificates), as files.
type pki struct {
	dir                           string
	public, peer                  *testcerts.CA
	serverCert, serverKey, pubCA  string
	peerCert, peerKey, peerCAFile string
	client                        testcerts.Pair // of the public CA
	peerPair                      testcerts.Pair
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), public: testcerts.NewCA(t, "public-ca"), peer: testcerts.NewCA(t, "peer-ca")}
	p.serverCert, p.serverKey = testcerts.WritePair(t, p.dir, "server", p.public.Server(t))
	p.pubCA = testcerts.Write(t, p.dir, "public-ca.crt", p.public.PEM)
	p.peerPair = p.peer.Peer(t, "node", "sluice-peer")
	p.peerCert, p.peerKey = testcerts.WritePair(t, p.dir, "peer", p.peerPair)
	p.peerCAFile = testcerts.Write(t, p.dir, "peer-ca.crt", p.peer.PEM)
	p.client = p.public.Client(t, "a-service")
	return p
}

// mtls turns on public mTLS and peer mTLS with separate CAs.
func (p *pki) mtls(c *node.Config) {
	c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = p.serverCert, p.serverKey, p.pubCA
	c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile = p.peerCert, p.peerKey, p.peerCAFile
	c.TLSCheckInterval = -1
}

func tlsClient(t testing.TB, cfg *tls.Config, addrs ...string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Addrs: addrs, Timeout: 5 * time.Second, DisableRouting: true, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var tlsLimit = client.Limit{Limit: 1000, Period: time.Hour}

func checkOnce(c *client.Client, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	res, err := c.Check(ctx, client.Item{Key: key, Limit: tlsLimit})
	if err != nil {
		return err
	}
	return res[0].Err
}

// The public gRPC port with mTLS: a client certificate of the client CA
// passes; none, one of another CA, or plaintext fail.
func TestTLSPublicGRPCNeedsClientCert(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, p.mtls)
	if err := checkOnce(tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &p.client), n.GRPCAddr()), "k"); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	stranger := testcerts.NewCA(t, "stranger").Client(t, "stranger")
	for name, c := range map[string]*client.Client{
		"no client certificate":    tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, nil), n.GRPCAddr()),
		"an untrusted certificate": tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &stranger), n.GRPCAddr()),
		"a peer certificate":       tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &p.peerPair), n.GRPCAddr()),
		"plaintext":                newClient(t, n.GRPCAddr()),
	} {
		if err := checkOnce(c, "k"); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: check = %v, want Unavailable (refused at the handshake)", name, err)
		}
	}
	// The client verifies the server: a client that does not trust the
	// public CA refuses the node.
	if err := checkOnce(tlsClient(t, testcerts.ClientConfig(t, p.peer.PEM, &p.client), n.GRPCAddr()), "k"); status.Code(err) != codes.Unavailable {
		t.Errorf("a client not trusting the server: check = %v, want Unavailable", err)
	}
}

// TLS without client certificates: any TLS client passes.
func TestTLSPublicWithoutClientCA(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, func(c *node.Config) {
		c.TLSCertFile, c.TLSKeyFile = p.serverCert, p.serverKey
		c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile = p.peerCert, p.peerKey, p.peerCAFile
	})
	if err := checkOnce(tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, nil), n.GRPCAddr()), "k"); err != nil {
		t.Fatalf("TLS without a client certificate: %v", err)
	}
	if err := checkOnce(newClient(t, n.GRPCAddr()), "k"); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext: %v, want Unavailable", err)
	}
}

// HTTP over TLS with mTLS: a check with a client certificate, refused
// (401) without one; plaintext HTTP is not served.
func TestTLSHTTP(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, p.mtls)
	get := func(cfg *tls.Config, scheme string) (int, error) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(scheme + "://" + n.HTTPAddr() + "/v1/check?key=k&limit=10&period=1m")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if code, err := get(testcerts.ClientConfig(t, p.public.PEM, &p.client), "https"); err != nil || code != http.StatusOK {
		t.Fatalf("https with a client certificate: %d, %v; want 200", code, err)
	}
	// Without one, the handshake passes (for the probes) and the check is
	// refused: see TestTLSProbesWithoutClientCert.
	if code, err := get(testcerts.ClientConfig(t, p.public.PEM, nil), "https"); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("https without a client certificate: %d, %v; want 401", code, err)
	}
	if code, err := get(nil, "http"); err == nil && code == http.StatusOK {
		t.Fatal("plaintext http: answered 200")
	}
}

// peerConn dials a node's peer service with cfg.
func peerConn(t testing.TB, addr string, cfg *tls.Config) sluicev1.PeerClient {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ServerName = "sluice-peer"
	cc, err := grpc.NewClient(addr, append(transport.ProtocolDialOptions(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)), wire.DialOption())...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return sluicev1.NewPeerClient(cc)
}

// peerCall makes one Peer.Fetch and one Peer.CheckStream call: what any
// caller would try to read or write counter state.
func peerCall(c sluicev1.PeerClient) (unary, stream error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, unary = c.Fetch(ctx, &sluicev1.FetchRequest{From: "n0", Hashes: []uint64{1}})
	s, err := c.CheckStream(ctx)
	if err == nil {
		_, err = s.Recv()
	}
	return unary, err
}

// The peer service admits only peers: a client certificate of the public
// CA is refused, PermissionDenied when the peer CA is the public one
// (the default) and at the handshake when they differ; a peer certificate
// passes.
func TestTLSPeerServiceRefusesNonPeers(t *testing.T) {
	p := newPKI(t)
	t.Run("shared CA", func(t *testing.T) {
		// One CA for all: the public client certificate is valid for the
		// peer listener's TLS, so the peer rule is all that stands.
		peerOfPublic := p.public.PeerAndServer(t, "node", "sluice-peer")
		dir := t.TempDir()
		cert, key := testcerts.WritePair(t, dir, "peer", peerOfPublic)
		n := startNode(t, func(c *node.Config) {
			c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = cert, key, p.pubCA
		})
		u, s := peerCall(peerConn(t, n.PeerAddr(), testcerts.ClientConfig(t, p.public.PEM, &p.client)))
		if status.Code(u) != codes.PermissionDenied || status.Code(s) != codes.PermissionDenied {
			t.Fatalf("public client on the peer service: Fetch %v, CheckStream %v; want PermissionDenied", u, s)
		}
		if !strings.Contains(u.Error(), `no DNS SAN "sluice-peer"`) {
			t.Errorf("refusal %q does not say why", u)
		}
		u, s = peerCall(peerConn(t, n.PeerAddr(), testcerts.ClientConfig(t, p.public.PEM, &peerOfPublic)))
		if u != nil || status.Code(s) == codes.PermissionDenied {
			t.Fatalf("peer on the peer service: Fetch %v, CheckStream %v; want admitted", u, s)
		}
	})
	t.Run("separate CAs", func(t *testing.T) {
		n := startNode(t, p.mtls)
		u, s := peerCall(peerConn(t, n.PeerAddr(), testcerts.ClientConfig(t, p.peer.PEM, &p.client)))
		if status.Code(u) != codes.Unavailable || status.Code(s) != codes.Unavailable {
			t.Fatalf("public client on the peer service: Fetch %v, CheckStream %v; want refused at the handshake", u, s)
		}
		u, _ = peerCall(peerConn(t, n.PeerAddr(), testcerts.ClientConfig(t, p.peer.PEM, nil)))
		if status.Code(u) != codes.Unavailable {
			t.Fatalf("no certificate on the peer service: Fetch %v; want refused at the handshake", u)
		}
		if u, _ = peerCall(peerConn(t, n.PeerAddr(), testcerts.ClientConfig(t, p.peer.PEM, &p.peerPair))); u != nil {
			t.Fatalf("peer on the peer service: Fetch %v", u)
		}
		// The public port no longer serves the peer service.
		u, _ = peerCall(peerConn(t, n.GRPCAddr(), func() *tls.Config {
			c := testcerts.ClientConfig(t, p.public.PEM, &p.client)
			c.InsecureSkipVerify = true // the server is the public one, named localhost
			return c
		}()))
		if status.Code(u) != codes.Unimplemented {
			t.Fatalf("peer service on the public port: Fetch %v, want Unimplemented", u)
		}
	})
}

// Three nodes with public and peer mTLS forward checks to their owners:
// the count of one key is exact through every node.
func TestTLSClusterForwards(t *testing.T) {
	p := newPKI(t)
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i := range 3 {
		tc.addWith(fmt.Sprintf("n%d", i), p.mtls)
	}
	tc.waitConverged()
	cs := make([]*client.Client, 3)
	for i, n := range tc.nodes {
		cs[i] = tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &p.client), n.GRPCAddr())
	}
	// Each of 60 keys checked once through each node, with a limit of 2:
	// exactly 2 allowed per key, whichever node owns it.
	lim := client.Limit{Limit: 2, Period: time.Hour}
	allowed := 0
	for i := range 180 {
		res, err := cs[i%3].Check(context.Background(), client.Item{Key: fmt.Sprintf("tls-key-%d", i/3), Limit: lim})
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		if res[0].Err != nil {
			t.Fatalf("check %d: %v", i, res[0].Err)
		}
		if res[0].Source != "owner" {
			t.Fatalf("check %d answered by %s (owner unreachable?)", i, res[0].Source)
		}
		if res[0].Allowed {
			allowed++
		}
	}
	if allowed != 120 {
		t.Fatalf("allowed %d of 180, want exactly 120", allowed)
	}
	var forwarded uint64
	for _, n := range tc.nodes {
		forwarded += n.PeerStats().ForwardedItems
	}
	if forwarded < 100 {
		t.Fatalf("%d checks forwarded over peer mTLS, want at least 100", forwarded)
	}
}

// Bad TLS settings fail New with an error naming the field.
func TestTLSBadConfig(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	junk := testcerts.Write(t, dir, "junk.pem", []byte("junk"))
	// A public server certificate has no sluice-peer SAN: it cannot be
	// the peer certificate by default.
	for _, tc := range []struct {
		name, field string
		mutate      func(*node.Config)
	}{
		{"cert without key", "TLSKeyFile", func(c *node.Config) { c.TLSCertFile = p.serverCert }},
		{"key without cert", "TLSCertFile", func(c *node.Config) { c.TLSKeyFile = p.serverKey }},
		{"client CA without cert", "TLSClientCAFile", func(c *node.Config) { c.TLSClientCAFile = p.pubCA }},
		{"missing cert file", "TLSCertFile", func(c *node.Config) { p.mtls(c); c.TLSCertFile = dir + "/nope.crt" }},
		{"junk key", "TLSKeyFile", func(c *node.Config) { p.mtls(c); c.TLSKeyFile = junk }},
		{"junk client CA", "TLSClientCAFile", func(c *node.Config) { p.mtls(c); c.TLSClientCAFile = junk }},
		{"peer cert without key", "PeerTLSKeyFile", func(c *node.Config) { p.mtls(c); c.PeerTLSKeyFile = "" }},
		{"peer key of another cert", "PeerTLSKeyFile", func(c *node.Config) { p.mtls(c); c.PeerTLSKeyFile = p.serverKey }},
		{"peer TLS without a CA", "PeerTLSCAFile", func(c *node.Config) {
			c.TLSCertFile, c.TLSKeyFile = p.serverCert, p.serverKey
		}},
		{"peer CA without a peer cert", "PeerTLSCertFile", func(c *node.Config) { c.PeerTLSCAFile = p.peerCAFile }},
		{"peer cert without the peer SAN", "TLSCertFile (the default of PeerTLSCertFile)", func(c *node.Config) {
			p.mtls(c)
			c.PeerTLSCertFile, c.PeerTLSKeyFile = "", ""
		}},
		{"another peer name", "PeerTLSCertFile", func(c *node.Config) { p.mtls(c); c.PeerTLSName = "other" }},
		{"missing peer CA", "PeerTLSCAFile", func(c *node.Config) { p.mtls(c); c.PeerTLSCAFile = dir + "/nope" }},
		{"no peer address", "PeerAddr", func(c *node.Config) { c.PeerAddr = "" }},
		{"bad peer address", "PeerAddr", func(c *node.Config) { c.PeerAddr = "127.0.0.1:-1" }},
		{"bad peer advertise address", "PeerAdvertiseAddr", func(c *node.Config) { c.PeerAdvertiseAddr = "no-port" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := node.LocalConfig("bad")
			tc.mutate(&cfg)
			n, err := node.New(cfg)
			if err == nil {
				n.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.field+":") && !strings.Contains(err.Error(), tc.field+" (") {
				t.Fatalf("New = %v, want an error naming %s", err, tc.field)
			}
			if strings.Contains(tc.name, "address") {
				return
			}
			if !errors.Is(err, node.ErrInvalidConfig) {
				t.Fatalf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// Peer mTLS and a cluster secret together (the Helm chart's cert-manager
// mode): the secret keys the gossip, the peer port runs mTLS against the
// peer CA, and the nodes cluster and forward.
func TestTLSPeerMTLSWithClusterSecret(t *testing.T) {
	p := newPKI(t)
	secret := writeSecret(t, t.TempDir())
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i := range 2 {
		tc.addWith(fmt.Sprintf("n%d", i), func(c *node.Config) {
			p.mtls(c)
			c.ClusterSecretFile = secret
		})
	}
	tc.waitConverged()
	cl := tlsClient(t, testcerts.ClientConfig(t, p.public.PEM, &p.client), tc.nodes[0].GRPCAddr())
	lim := client.Limit{Limit: 1, Period: time.Hour}
	for i := range 40 {
		res, err := cl.Check(context.Background(), client.Item{Key: fmt.Sprintf("both-key-%d", i), Limit: lim})
		if err != nil || res[0].Err != nil {
			t.Fatalf("check %d: %v %v", i, err, res[0].Err)
		}
		if res[0].Source != "owner" {
			t.Fatalf("check %d answered by %s (owner unreachable?)", i, res[0].Source)
		}
	}
	if f := tc.nodes[0].PeerStats().ForwardedItems; f == 0 {
		t.Fatal("no check forwarded over peer mTLS")
	}
}
