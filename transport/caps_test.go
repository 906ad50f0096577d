package transport

import (
	"context"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// One connection with 100 CheckStream streams, sending without reading
// while every decision waits: at most the connection's budget is in
// flight (not streams x wire.MaxStreamInflight), the excess is answered
// RESOURCE_EXHAUSTED at once, and another connection's messages are still
// admitted and answered.
func TestPeerFloodCappedPerConnection(t *testing.T) {
	const (
		perConn   = 64
		streams   = 100
		perStream = 10
	)
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{}) // every decision waits
	var refused atomic.Int64
	limits, err := wire.NewLimits(wire.LimitsConfig{MaxInflightPerConn: perConn, MaxInflight: 1024, MaxStreamsPerConn: streams,
		Refused: func(string) { refused.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(limits.Close)
	srv, err := NewServer(ServerConfig{Service: fake, Self: "owner", Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(append(wire.ServerOptions(), limits.ServerOptions()...)...)
	srv.Register(gs)
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(limits.Listener(lis)) }()
	t.Cleanup(func() { gs.Stop(); <-served })
	m := ring.Member{Name: "owner", GRPCAddr: lis.Addr().String()}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := runtime.NumGoroutine()
	flood := rawPeerClient(t, m)
	ss := make([]sluicev1.Peer_CheckStreamClient, streams)
	for i := range ss {
		if ss[i], err = flood.CheckStream(ctx); err != nil {
			t.Fatal(err)
		}
	}
	send := func(s sluicev1.Peer_CheckStreamClient, n int) {
		for id := range n {
			req := &sluicev1.PeerCheckStreamRequest{Id: uint64(id), Request: &sluicev1.PeerCheckRequest{
				From: "n1", Items: []*sluicev1.PeerItem{tokenItem(uint64(id), 10, 1)}}}
			if err := s.Send(req); err != nil {
				t.Error(err)
				return
			}
		}
	}
	for _, s := range ss {
		send(s, perStream)
	}
	entered := func() int {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return len(fake.checks)
	}
	waitFor(t, "every flood message decided or refused", func() bool {
		return entered()+int(refused.Load()) == streams*perStream
	})
	if n := entered(); n != perConn {
		t.Errorf("%d flood messages in flight, want the connection's budget %d", n, perConn)
	}
	if g := runtime.NumGoroutine() - base; g > perConn+8*streams {
		t.Errorf("%d more goroutines, want at most %d", g, perConn+8*streams)
	}

	// Another connection is admitted while the flood's is full.
	other, err := rawPeerClient(t, m).CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send(other, 5)
	waitFor(t, "the other connection's messages admitted", func() bool { return entered() == perConn+5 })

	close(fake.gate)
	got := map[codes.Code]int{}
	var mu sync.Mutex
	var readers sync.WaitGroup
	for _, s := range append(ss, other) {
		_ = s.CloseSend()
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				resp, err := s.Recv()
				if err != nil {
					return
				}
				mu.Lock()
				got[codes.Code(resp.GetCode())]++
				mu.Unlock()
			}
		}()
	}
	readers.Wait()
	want := map[codes.Code]int{codes.OK: perConn + 5, codes.ResourceExhausted: streams*perStream - perConn}
	if got[codes.OK] != want[codes.OK] || got[codes.ResourceExhausted] != want[codes.ResourceExhausted] || len(got) != 2 {
		t.Errorf("answers %v, want %v", got, want)
	}
}
