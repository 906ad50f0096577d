package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/internal/tlsconfig"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// raftRecorder is a RaftReceiver that records what each sender stepped.
// It refuses senders outside members (nil: none refused) and, as not a
// Raft message, the message "not-raft".
type raftRecorder struct {
	members map[string]bool
	mu      sync.Mutex
	got     map[string][]string
}

func newRaftRecorder(members ...string) *raftRecorder {
	r := &raftRecorder{got: map[string][]string{}}
	if len(members) > 0 {
		r.members = map[string]bool{}
		for _, m := range members {
			r.members[m] = true
		}
	}
	return r
}

func (r *raftRecorder) StepRaft(_ context.Context, from string, msg []byte) error {
	if r.members != nil && !r.members[from] {
		return fmt.Errorf("%w: %s", ErrRaftNotMember, from)
	}
	if string(msg) == "not-raft" {
		return fmt.Errorf("%w: cannot decode", ErrRaftMessage)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got[from] = append(r.got[from], string(msg))
	return nil
}

// from returns a copy of what from's messages were.
func (r *raftRecorder) from(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got[name]...)
}

// total is the number of messages stepped, all senders.
func (r *raftRecorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, g := range r.got {
		n += len(g)
	}
	return n
}

// noPeerService is a PeerService for servers that answer only Raft.
type noPeerService struct{ PeerService }

// raftPKI is a peer CA and its files, as a node's peer TLS has them.
type raftPKI struct {
	ca  *testcerts.CA
	dir string
}

func newRaftPKI(t *testing.T) raftPKI {
	return raftPKI{ca: testcerts.NewCA(t, "peer-ca"), dir: t.TempDir()}
}

// source loads pair, and the CA, as a node loads its peer TLS files.
func (k raftPKI) source(t *testing.T, file string, pair testcerts.Pair) *tlsconfig.Source {
	t.Helper()
	cert, key := testcerts.WritePair(t, k.dir, file, pair)
	ca := testcerts.Write(t, k.dir, "ca.pem", k.ca.PEM)
	src, err := tlsconfig.New(tlsconfig.Config{
		Cert: tlsconfig.File{Path: cert, Field: "cert"}, Key: tlsconfig.File{Path: key, Field: "key"},
		CA: tlsconfig.File{Path: ca, Field: "ca"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// peer is the peer TLS of the node named name.
func (k raftPKI) peer(t *testing.T, name string) *tlsconfig.Source {
	return k.source(t, name, k.ca.Peer(t, name, tlsconfig.DefaultPeerName))
}

// dialCreds are the credentials a node dials its peers with.
func dialCreds(src *tlsconfig.Source) grpc.DialOption {
	return grpc.WithTransportCredentials(tlsconfig.ClientCredentials(src, tlsconfig.DefaultPeerName))
}

// startRaftPeer serves sluice.v1.Peer for self, with recv as its Raft
// receiver, as a node serves its peer port: mTLS against the peer CA,
// only peers admitted (tlsconfig.PeerAuth), the protocol check.
func startRaftPeer(t *testing.T, self string, recv RaftReceiver, src *tlsconfig.Source) (string, *Server, *grpc.Server) {
	t.Helper()
	auth := &tlsconfig.PeerAuth{Source: src, Service: PeerServiceName}
	opts := []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(tlsconfig.ServerConfig(src, tls.RequireAndVerifyClientCert, "h2"))),
		grpc.ChainUnaryInterceptor(auth.Unary()), grpc.ChainStreamInterceptor(auth.Stream()),
	}
	return serveRaftPeer(t, self, recv, opts...)
}

// serveRaftPeer serves sluice.v1.Peer for self, with recv as its Raft
// receiver, on a gRPC server of opts and the protocol check.
func serveRaftPeer(t *testing.T, self string, recv RaftReceiver, opts ...grpc.ServerOption) (string, *Server, *grpc.Server) {
	t.Helper()
	gs := grpc.NewServer(append(opts, ProtocolServerOptions()...)...)
	srv, err := NewServer(ServerConfig{Service: noPeerService{}, Self: self, Raft: recv})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	return lis.Addr().String(), srv, gs
}

// raftCall sends reqs on a new Raft stream of a client dialed with creds,
// closes its side and returns how the stream ended (nil: OK).
func raftCall(t *testing.T, addr string, creds credentials.TransportCredentials, reqs ...*sluicev1.RaftRequest) error {
	t.Helper()
	// A node of this build's protocol: a node of protocol 0 is outside
	// the window (docs/compatibility.md).
	cc, err := grpc.NewClient(addr, append(protocolDialOptions(PeerProtocol), grpc.WithTransportCredentials(creds))...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := sluicev1.NewPeerClient(cc).Raft(ctx)
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if cs.Send(r) != nil {
			break // the status comes from Recv
		}
	}
	_ = cs.CloseSend()
	for {
		if _, err := cs.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func raftReq(from string, msgs ...string) *sluicev1.RaftRequest {
	r := &sluicev1.RaftRequest{From: from}
	for _, m := range msgs {
		r.Messages = append(r.Messages, []byte(m))
	}
	return r
}

// Callers the peer port must refuse: a node the group does not take
// messages from, one naming this node, and callers that are not peers
// at all. None of their messages reaches the receiver.
func TestRaftRefusesNonMembersAndStrangers(t *testing.T) {
	pki := newRaftPKI(t)
	rec := newRaftRecorder("a")
	addr, _, _ := startRaftPeer(t, "b", rec, pki.peer(t, "b"))
	peerA := pki.ca.Peer(t, "a", tlsconfig.DefaultPeerName)
	asPeer := credentials.NewTLS(withServerName(testcerts.ClientConfig(t, pki.ca.PEM, &peerA)))
	client := pki.ca.Client(t, "app")
	other := testcerts.NewCA(t, "other-ca")
	otherPeer := other.Peer(t, "a", tlsconfig.DefaultPeerName)

	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		req   *sluicev1.RaftRequest
		code  codes.Code
	}{
		{"member", asPeer, raftReq("a", "m1"), codes.OK},
		{"non-member", asPeer, raftReq("mallory", "m1"), codes.PermissionDenied},
		{"this node's name", asPeer, raftReq("b", "m1"), codes.PermissionDenied},
		{"no client certificate", credentials.NewTLS(withServerName(testcerts.ClientConfig(t, pki.ca.PEM, nil))), raftReq("a", "m1"), codes.Unavailable},
		{"certificate without the peer name", credentials.NewTLS(withServerName(testcerts.ClientConfig(t, pki.ca.PEM, &client))), raftReq("a", "m1"), codes.PermissionDenied},
		{"certificate of another CA", credentials.NewTLS(withServerName(testcerts.ClientConfig(t, pki.ca.PEM, &otherPeer))), raftReq("a", "m1"), codes.Unavailable},
		{"plaintext", insecure.NewCredentials(), raftReq("a", "m1"), codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := raftCall(t, addr, tc.creds, tc.req)
			if got := status.Code(err); got != tc.code {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.code)
			}
		})
	}
	if got := rec.total(); got != 1 {
		t.Fatalf("receiver stepped %d messages (%v), want only the member's 1", got, rec.got)
	}
}

func withServerName(c *tls.Config) *tls.Config {
	c.ServerName = tlsconfig.DefaultPeerName
	return c
}

// Bad requests end the stream with InvalidArgument naming the field; a
// request is validated whole before any of its messages is stepped.
func TestRaftBadInput(t *testing.T) {
	pki := newRaftPKI(t)
	rec := newRaftRecorder()
	addr, _, _ := startRaftPeer(t, "b", rec, pki.peer(t, "b"))
	peerA := pki.ca.Peer(t, "a", tlsconfig.DefaultPeerName)
	creds := credentials.NewTLS(withServerName(testcerts.ClientConfig(t, pki.ca.PEM, &peerA)))
	many := make([]string, MaxRaftBatch+1)
	for i := range many {
		many[i] = "m"
	}
	for _, tc := range []struct {
		name  string
		req   *sluicev1.RaftRequest
		field string
	}{
		{"no from", raftReq("", "m"), "from"},
		{"long from", raftReq(strings.Repeat("a", maxRaftFrom+1), "m"), "from"},
		{"no messages", raftReq("a"), "messages"},
		{"too many messages", raftReq("a", many...), "messages"},
		{"empty message", raftReq("a", "m", ""), "messages[1]"},
		{"oversized message", raftReq("a", strings.Repeat("x", MaxRaftMessageBytes+1)), "messages[0]"},
		{"not a raft message", raftReq("a", "m", "m", "not-raft"), "messages[2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := badRequestField(t, raftCall(t, addr, creds, tc.req)); got != tc.field {
				t.Fatalf("field = %q, want %q", got, tc.field)
			}
		})
	}
	// Only the two messages stepped before "not-raft" got through.
	if got := rec.from("a"); len(got) != 2 {
		t.Fatalf("stepped %d messages, want 2 (those before not-raft)", len(got))
	}
	// The bounds themselves are accepted.
	if err := raftCall(t, addr, creds, raftReq("a", strings.Repeat("x", MaxRaftMessageBytes)), raftReq("a", many[1:]...)); err != nil {
		t.Fatalf("a request at the bounds: %v", err)
	}
}

// A node given no receiver answers Unimplemented.
func TestRaftWithoutReceiver(t *testing.T) {
	pki := newRaftPKI(t)
	addr, _, _ := startRaftPeer(t, "b", nil, pki.peer(t, "b"))
	peerA := pki.ca.Peer(t, "a", tlsconfig.DefaultPeerName)
	creds := credentials.NewTLS(withServerName(testcerts.ClientConfig(t, pki.ca.PEM, &peerA)))
	if err := raftCall(t, addr, creds, raftReq("a", "m")); status.Code(err) != codes.Unimplemented {
		t.Fatalf("err = %v, want Unimplemented", err)
	}
}

// Drain asks the senders to close their Raft streams, so that the gRPC
// server's GracefulStop does not wait on them; the messages sent before
// are stepped.
func TestRaftDrain(t *testing.T) {
	pki := newRaftPKI(t)
	rec := newRaftRecorder()
	addr, srv, gs := startRaftPeer(t, "b", rec, pki.peer(t, "b"))
	s, _ := newTestRaftSender(t, "a", dialCreds(pki.peer(t, "a")), RaftSenderConfig{})
	s.Send("b", addr, [][]byte{[]byte("m1")})
	waitFor(t, "m1 stepped", func() bool { return len(rec.from("a")) == 1 })
	srv.Drain()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		gs.GracefulStop()
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		gs.Stop()
		<-stopped
		t.Fatal("GracefulStop waited on the Raft stream after Drain")
	}
}

// newTestRaftSender is a RaftSender of the node self, dialing with dial
// (its credentials), closed at the test's end (before its PeerClient), and
// its metrics' registry.
func newTestRaftSender(t *testing.T, self string, dial grpc.DialOption, cfg RaftSenderConfig) (*RaftSender, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	pm, err := NewPeerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Peers = newTestPeerClient(t, PeerClientConfig{Self: self, Metrics: pm, DialOptions: []grpc.DialOption{dial}})
	s, err := NewRaftSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, reg
}
