//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/testcerts"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/transport"
)

// e2ePKI is the certificates of the mTLS cluster, written to a directory
// that is copied into every container.
type e2ePKI struct {
	dir          string
	public, peer *testcerts.CA
	client       testcerts.Pair // of the public CA
}

// write writes a PEM file readable by the container's non-root user
// (docker cp gives the files to root).
func (p *e2ePKI) write(t *testing.T, name string, data []byte) {
	t.Helper()
	path := testcerts.Write(t, p.dir, name, data)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func newE2EPKI(t *testing.T) *e2ePKI {
	p := &e2ePKI{dir: filepath.Join(t.TempDir(), "tls"), public: testcerts.NewCA(t, "public-ca"), peer: testcerts.NewCA(t, "peer-ca")}
	if err := os.Mkdir(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	server := p.public.Server(t)
	peer := p.peer.Peer(t, "node", "sluice-peer")
	p.write(t, "server.crt", server.Cert)
	p.write(t, "server.key", server.Key)
	p.write(t, "client-ca.crt", p.public.PEM)
	p.write(t, "peer.crt", peer.Cert)
	p.write(t, "peer.key", peer.Key)
	p.write(t, "peer-ca.crt", p.peer.PEM)
	p.client = p.public.Client(t, "e2e-client")
	return p
}

// TestE2ETLS runs a 3-container cluster with mTLS on the public ports and
// peer mTLS (separate CAs): checks pass with a client certificate and fail
// without; non-peer certificates are refused on the peer service; a
// certificate rotation under load loses no check.
func TestE2ETLS(t *testing.T) {
	requireDocker(t)
	p := newE2EPKI(t)
	start := time.Now()
	c := newClusterOpts(t, 3, clusterOpts{
		env: []string{
			"SLUICE_TLS_CERT_FILE=" + tlsMount + "/server.crt",
			"SLUICE_TLS_KEY_FILE=" + tlsMount + "/server.key",
			"SLUICE_TLS_CLIENT_CA_FILE=" + tlsMount + "/client-ca.crt",
			"SLUICE_PEER_TLS_CERT_FILE=" + tlsMount + "/peer.crt",
			"SLUICE_PEER_TLS_KEY_FILE=" + tlsMount + "/peer.key",
			"SLUICE_PEER_TLS_CA_FILE=" + tlsMount + "/peer-ca.crt",
		},
		files:       p.dir,
		tls:         testcerts.ClientConfig(t, p.public.PEM, &p.client),
		publishPeer: true,
	})
	t.Logf("mTLS cluster of 3 up in %v", time.Since(start).Round(time.Millisecond))
	if d, err := c.waitDataPath(t, base, 60*time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("every node reaches the owners over peer mTLS after %v", d.Round(time.Millisecond))
	}

	t.Run("ClientCertificate", func(t *testing.T) { tlsClientCert(t, c, p) })
	t.Run("PeerServiceRefusesNonPeers", func(t *testing.T) { tlsPeerRefuses(t, c, p) })
	t.Run("RotationUnderLoad", func(t *testing.T) { tlsRotation(t, c, p) })
}

func tlsClientCert(t *testing.T, c *cluster, p *e2ePKI) {
	lim := client.Limit{Limit: 30, Period: time.Hour}
	allowed := 0
	for i := range 90 {
		res, err := c.nodes[base[i%3]].cli.Check(context.Background(), client.Item{Key: "tls-exact", Limit: lim})
		if err != nil || res[0].Err != nil {
			t.Fatalf("check %d with a client certificate: %v", i, err)
		}
		if res[0].Allowed {
			allowed++
		}
	}
	if allowed != 30 {
		t.Errorf("admitted %d of 90 through 3 mTLS nodes, want exactly 30", allowed)
	}
	stranger := testcerts.NewCA(t, "stranger").Client(t, "stranger")
	for name, cfg := range map[string]*tls.Config{
		"no client certificate":    testcerts.ClientConfig(t, p.public.PEM, nil),
		"an untrusted certificate": testcerts.ClientConfig(t, p.public.PEM, &stranger),
		"plaintext":                nil,
	} {
		cli, err := client.New(client.Config{Addrs: []string{c.nodes["n0"].grpcAddr()}, Timeout: 2 * time.Second, DisableRouting: true, TLS: cfg})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cli.Check(context.Background(), client.Item{Key: "tls-exact", Limit: lim})
		cli.Close()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s: check = %v, want refused (Unavailable)", name, err)
		}
	}
}

// peerFetch calls Peer.Fetch on a node's published peer port with cfg.
func peerFetch(t *testing.T, n *node, cfg *tls.Config) error {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ServerName = "sluice-peer"
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", n.peerPort), append(transport.ProtocolDialOptions(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = sluicev1.NewPeerClient(cc).Fetch(ctx, &sluicev1.FetchRequest{From: n.name, Hashes: []uint64{1}})
	return err
}

func tlsPeerRefuses(t *testing.T, c *cluster, p *e2ePKI) {
	n := c.nodes["n0"]
	// A client certificate of the public CA: refused at the handshake.
	if err := peerFetch(t, n, testcerts.ClientConfig(t, p.peer.PEM, &p.client)); status.Code(err) != codes.Unavailable {
		t.Errorf("public client certificate on the peer port: %v, want refused at the handshake", err)
	}
	// A certificate of the peer CA without the peer SAN: the handshake
	// passes, the peer service refuses it.
	notPeer := p.peer.Issue(t, testcerts.Options{CommonName: "intruder", Client: true, DNSNames: []string{"intruder"}})
	err := peerFetch(t, n, testcerts.ClientConfig(t, p.peer.PEM, &notPeer))
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("non-peer certificate of the peer CA: %v, want PermissionDenied", err)
	}
	if out, _ := docker("logs", "--tail", "50", n.name); !containsAll(out, "caller refused: not a peer") {
		t.Errorf("the refusal is not logged:\n%s", out)
	}
	// Plaintext is not served on the peer port.
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", n.peerPort), grpc.WithTransportCredentials(insecureCreds()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := sluicev1.NewPeerClient(cc).Fetch(ctx, &sluicev1.FetchRequest{From: n.name, Hashes: []uint64{1}}); status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext on the peer port: %v, want Unavailable", err)
	}
}

// servedSerial does a fresh handshake with addr and returns the serial of
// the certificate served (nil on failure).
func servedSerial(addr string, cfg *tls.Config) *big.Int {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

func tlsRotation(t *testing.T, c *cluster, p *e2ePKI) {
	var vias []via
	for _, s := range base {
		vias = append(vias, via{s, c.nodes[s].cli})
	}
	l := startLoad(vias, keysN("tls-rot", 300), client.Limit{Limit: 1_000_000, Period: time.Second}, 6, 0)
	defer l.Stop()
	if !l.waitFor(30*time.Second, func(r []rec) bool { return len(r) > 500 }) {
		t.Fatal("no load")
	}
	// New certificates, written into each container in place, the
	// certificate before the key (as a rotation in place does).
	server := p.public.Server(t)
	peer := p.peer.Peer(t, "node", "sluice-peer")
	for _, f := range []struct {
		name string
		data []byte
	}{{"server.crt", server.Cert}, {"peer.crt", peer.Cert}, {"server.key", server.Key}, {"peer.key", peer.Key}} {
		p.write(t, f.name, f.data)
		for _, s := range base {
			mustDocker(t, "cp", filepath.Join(p.dir, f.name), c.nodes[s].name+":"+tlsMount+"/"+f.name)
		}
	}
	peerCfg := testcerts.ClientConfig(t, p.peer.PEM, &testcerts.Pair{Cert: peer.Cert, Key: peer.Key})
	peerCfg.ServerName = "sluice-peer"
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range base {
		n := c.nodes[s]
		for {
			pub := servedSerial(n.grpcAddr(), c.opts.tls)
			prr := servedSerial(fmt.Sprintf("127.0.0.1:%d", n.peerPort), peerCfg)
			if pub != nil && pub.Cmp(server.Leaf.SerialNumber) == 0 && prr != nil && prr.Cmp(peer.Leaf.SerialNumber) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: new handshakes still see the old certificates (public %v, peer %v)", s, pub, prr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	before := len(l.snapshot())
	if !l.waitFor(30*time.Second, func(r []rec) bool { return len(r) > before+500 }) {
		t.Fatal("load stalled after the rotation")
	}
	// New client connections (new handshakes) work with the new server
	// certificate.
	fresh := c.allClient(base...)
	if _, err := fresh.Check(context.Background(), client.Item{Key: "after-rotation", Limit: client.Limit{Limit: 10, Period: time.Hour}}); err != nil {
		t.Fatalf("a new connection after the rotation: %v", err)
	}
	s := summarize(l.Stop())
	t.Logf("rotation under load: %s", s)
	requireNoErrors(t, s)
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
