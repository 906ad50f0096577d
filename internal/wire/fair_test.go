package wire

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/peer"
)

// connGates returns the gates of n connections through l's Listener, as a
// gRPC server would find them.
func connGates(t testing.TB, l *Limits, n int) []*Gate {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listener(raw)
	t.Cleanup(func() { ln.Close() })
	gates := make([]*Gate, n)
	for i := range gates {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		gates[i] = l.Gate(peer.NewContext(context.Background(), &peer.Peer{Addr: s.RemoteAddr()}))
	}
	return gates
}

// tally records the messages of a test as they run.
type tally struct {
	mu      sync.Mutex
	order   []int // the flooder's messages, as they started
	running int   // the flooder's running now
	most    int   // the flooder's most running at once
}

// A connection with a thousand messages admitted, all waiting: at most
// MaxRunningPerConn of them are running goroutines, the rest wait in the
// connection's queue; another connection's message runs while the
// flooder's first ones still hold their workers, without waiting for any
// of the flooder's to finish, and the flooder's queued ones then follow, each
// as one of its running ones finishes.
func TestFlowSharesPool(t *testing.T) {
	const share, flood = 4, 1000
	l, err := NewLimits(LimitsConfig{MaxRunningPerConn: share, StallAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := connGates(t, l, 2)
	flooder, other := g[0], g[1]
	var tl tally
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range flood {
		if err := flooder.Enter(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		flooder.Go(func() {
			defer wg.Done()
			defer flooder.Leave()
			tl.mu.Lock()
			tl.order = append(tl.order, i)
			tl.running++
			tl.most = max(tl.most, tl.running)
			tl.mu.Unlock()
			<-release
			tl.mu.Lock()
			tl.running--
			tl.mu.Unlock()
		})
	}
	started := func() int {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return len(tl.order)
	}
	waitUntil(t, func() bool { return started() >= share })

	if err := other.Enter(); err != nil {
		t.Fatal(err)
	}
	done := make(chan int)
	other.Go(func() {
		defer other.Leave()
		done <- started()
	})
	select {
	case n := <-done:
		if n > share {
			t.Errorf("the other connection's message ran after %d of the flooder's started, want at most %d", n, share)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the other connection's message did not run while the flooder's waited")
	}

	for range flood {
		release <- struct{}{}
	}
	wg.Wait()
	if tl.most > share {
		t.Errorf("the flooder ran %d messages at once, want at most %d", tl.most, share)
	}
	if len(tl.order) != flood {
		t.Errorf("%d of the flooder's %d messages ran", len(tl.order), flood)
	}
}

// Messages that wait rather than compute do not hold their connection's
// queue for good: when none of the running ones finishes for StallAfter,
// the queued ones start, so every one of them runs although none ends.
func TestFlowStallReleases(t *testing.T) {
	const share, n = 2, 9
	l, err := NewLimits(LimitsConfig{MaxRunningPerConn: share, StallAfter: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := connGates(t, l, 1)[0]
	var started atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		g.Go(func() {
			defer wg.Done()
			started.Add(1)
			<-release
		})
	}
	waitUntil(t, func() bool { return started.Load() == n })
	close(release)
	wg.Wait()
}

// The cost of running a message on the pool through its connection's gate
// (go test -run '^$' -bench Gate -benchmem ./internal/wire/).
func BenchmarkGateGo(b *testing.B) {
	l, err := NewLimits(LimitsConfig{MaxInflightPerConn: 1 << 20, MaxInflight: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	g := connGates(b, l, 1)[0]
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.Enter(); err != nil {
				b.Error(err)
				return
			}
			wg.Add(1)
			g.Go(func() { g.Leave(); wg.Done() })
		}
	})
	wg.Wait()
}
