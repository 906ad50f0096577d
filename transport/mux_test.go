package transport

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// countingPeer is the real peer server, counting how Check calls arrive.
type countingPeer struct {
	*peerServer
	unary, streams atomic.Int64
}

func (c *countingPeer) Check(ctx context.Context, req *sluicev1.PeerCheckRequest) (*sluicev1.PeerCheckResponse, error) {
	c.unary.Add(1)
	return c.peerServer.Check(ctx, req)
}

func (c *countingPeer) CheckStream(s sluicev1.Peer_CheckStreamServer) error {
	c.streams.Add(1)
	return c.peerServer.CheckStream(s)
}

// oldPeer is a node from before Peer.CheckStream: only unary Check.
type oldPeer struct {
	sluicev1.UnimplementedPeerServer
	inner *peerServer
	unary atomic.Int64
}

func (o *oldPeer) Check(ctx context.Context, req *sluicev1.PeerCheckRequest) (*sluicev1.PeerCheckResponse, error) {
	o.unary.Add(1)
	return o.inner.Check(ctx, req)
}

func newInnerPeer(svc PeerService, name string, drain context.Context) *peerServer {
	ps := &peerServer{svc: svc, name: name, drain: drain}
	for i := range ps.obs {
		ps.obs[i] = nopObserver{}
	}
	return ps
}

// serveRaw serves srv as sluice.v1.Peer on a loopback port until cleanup.
func serveRaw(t *testing.T, name string, srv sluicev1.PeerServer) ring.Member {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	sluicev1.RegisterPeerServer(s, srv)
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Serve(lis) }()
	t.Cleanup(func() { s.Stop(); <-served })
	return ring.Member{Name: name, GRPCAddr: lis.Addr().String()}
}

// checkRemaining forwards one check of key hash and returns what remains.
func checkRemaining(t *testing.T, c *PeerClient, m ring.Member, hash uint64) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := make([]limiter.Answer, 1)
	if err := c.Check(ctx, m, 0, []limiter.Forwarded{{Hash: hash, Limit: tbLimit(100), Cost: 1}}, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Err != nil {
		t.Fatal(out[0].Err)
	}
	return out[0].Result.Remaining
}

// Forwarded checks travel on one stream per peer, not as unary calls.
func TestPeerChecksUseOneStream(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	srv := &countingPeer{peerServer: newInnerPeer(fake, "n2", nil)}
	m := serveRaw(t, "n2", srv)
	c := newTestPeerClient(t, PeerClientConfig{})
	for i := int64(1); i <= 20; i++ {
		if got := checkRemaining(t, c, m, 42); got != 100-i {
			t.Fatalf("check %d: remaining %d, want %d", i, got, 100-i)
		}
	}
	if srv.unary.Load() != 0 || srv.streams.Load() != 1 {
		t.Fatalf("%d unary calls and %d streams, want 0 and 1", srv.unary.Load(), srv.streams.Load())
	}
}

// A peer from before CheckStream answers UNIMPLEMENTED; its checks go as
// unary calls, none fails, and the circuit stays closed.
func TestPeerWithoutCheckStreamGetsUnaryCalls(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	srv := &oldPeer{inner: newInnerPeer(fake, "n2", nil)}
	m := serveRaw(t, "n2", srv)
	c := newTestPeerClient(t, PeerClientConfig{})
	for i := int64(1); i <= 5; i++ {
		if got := checkRemaining(t, c, m, 7); got != 100-i {
			t.Fatalf("check %d: remaining %d, want %d", i, got, 100-i)
		}
	}
	if srv.unary.Load() != 5 {
		t.Fatalf("%d unary calls, want 5 (each check applied once)", srv.unary.Load())
	}
	if c.CircuitOpen("n2") {
		t.Fatal("circuit opened for a peer that answered every check")
	}
}

// A draining peer ends its stream cleanly; the next check opens another.
func TestPeerStreamDrain(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	drain, drainNow := context.WithCancel(context.Background())
	defer drainNow()
	srv := &countingPeer{peerServer: newInnerPeer(fake, "n2", drain)}
	m := serveRaw(t, "n2", srv)
	c := newTestPeerClient(t, PeerClientConfig{})
	if got := checkRemaining(t, c, m, 9); got != 99 {
		t.Fatalf("remaining %d, want 99", got)
	}
	drainNow()
	waitFor(t, "the drained stream to be dropped", func() bool {
		c.mu.Lock()
		p := c.peers["n2"]
		c.mu.Unlock()
		p.mux.mu.Lock()
		defer p.mux.mu.Unlock()
		return p.mux.st == nil
	})
	if got := checkRemaining(t, c, m, 9); got != 98 {
		t.Fatalf("after the drain: remaining %d, want 98", got)
	}
	if srv.streams.Load() != 2 || srv.unary.Load() != 0 {
		t.Fatalf("%d streams and %d unary calls, want 2 and 0", srv.streams.Load(), srv.unary.Load())
	}
}
