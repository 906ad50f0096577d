package transport

import (
	"context"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// A client that floods Peer.CheckStream without reading the replies (the
// review's 20,000 messages made 14,840 goroutines) gets at most
// wire.MaxStreamInflight messages decided at once: the server stops
// reading, and the goroutine count stays bounded.
func TestPeerCheckStreamFloodBounded(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{}) // every decision waits: nothing is answered
	m, _ := startPeerServer(t, "owner", fake)
	peer := rawPeerClient(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	base := runtime.NumGoroutine()
	stream, err := peer.CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20_000 {
			req := &sluicev1.PeerCheckStreamRequest{Id: uint64(i), Request: &sluicev1.PeerCheckRequest{
				From: "n1", Items: []*sluicev1.PeerItem{tokenItem(uint64(i), 10, 1)}}}
			if stream.Send(req) != nil {
				return
			}
			sent.Add(1)
		}
	}()
	entered := func() int {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return len(fake.checks)
	}
	// Past the bound, as far as the flow-control windows let the client.
	waitFor(t, "the server to take the first messages", func() bool { return entered() >= wire.MaxStreamInflight })
	waitFor(t, "more messages sent than the bound", func() bool { return sent.Load() >= wire.MaxStreamInflight+200 })
	if n := entered(); n > wire.MaxStreamInflight {
		t.Errorf("%d messages decided at once, want at most %d", n, wire.MaxStreamInflight)
	}
	if g := runtime.NumGoroutine() - base; g > wire.MaxStreamInflight+40 {
		t.Errorf("%d more goroutines with %d messages sent, want at most %d + 40", g, sent.Load(), wire.MaxStreamInflight)
	}
	close(fake.gate)
	cancel()
	<-done
}

// panickyPeer is a fakePeer whose Check panics.
type panickyPeer struct{ *fakePeer }

func (panickyPeer) CheckForwarded(context.Context, string, int, []limiter.Forwarded, []limiter.Answer) error {
	panic("boom")
}

// A Check that panics in a CheckStream goroutine answers its message
// INTERNAL, counted by the server's Recovery, and the stream and the
// process go on.
func TestPeerCheckStreamRecoversPanics(t *testing.T) {
	var panics atomic.Int64
	pm, err := NewPeerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{Service: panickyPeer{newFakePeer(t, store.Config{})}, Self: "owner", Metrics: pm,
		Recovery: &wire.Recovery{Count: func(string) { panics.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-served })
	peer := rawPeerClient(t, ring.Member{Name: "owner", GRPCAddr: lis.Addr().String()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := peer.CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 2; id++ {
		req := &sluicev1.PeerCheckStreamRequest{Id: id, Request: &sluicev1.PeerCheckRequest{From: "n1", Items: []*sluicev1.PeerItem{tokenItem(id, 10, 1)}}}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetId() != id || codes.Code(resp.GetCode()) != codes.Internal {
			t.Fatalf("message %d: %+v, want INTERNAL", id, resp)
		}
	}
	if n := panics.Load(); n != 2 {
		t.Fatalf("%d panics counted, want 2", n)
	}
}
