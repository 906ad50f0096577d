package transport

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/store"

	"github.com/sluice-rl/sluice/internal/wire"
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
	// Well past the bound, what the flow-control windows hold.
	waitFor(t, "500 messages sent", func() bool { return sent.Load() >= 500 })
	waitFor(t, "the server to take the first messages", func() bool { return entered() >= wire.MaxStreamInflight })
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
