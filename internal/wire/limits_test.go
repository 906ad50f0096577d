package wire

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func TestNewLimitsBadInput(t *testing.T) {
	for field, cfg := range map[string]LimitsConfig{
		"MaxConns":           {MaxConns: -1},
		"MaxStreamsPerConn":  {MaxStreamsPerConn: -1},
		"MaxInflightPerConn": {MaxInflightPerConn: -1},
		"MaxInflight":        {MaxInflight: -1},
		"MaxRunningPerConn":  {MaxRunningPerConn: -1},
		"StallAfter":         {StallAfter: -time.Millisecond},
	} {
		if _, err := NewLimits(cfg); !errors.Is(err, ErrLimits) || !strings.Contains(err.Error(), field+":") {
			t.Errorf("%s: %v, want ErrLimits naming it", field, err)
		}
	}
	for field, cfg := range map[string]ShedConfig{
		"Share":    {Share: 1.01},
		"Share:":   {Share: -0.5},
		"Interval": {Interval: -time.Second},
	} {
		if _, err := NewShedder(cfg); !errors.Is(err, ErrShed) || !strings.Contains(err.Error(), strings.TrimSuffix(field, ":")+":") {
			t.Errorf("%s: %v, want ErrShed naming it", field, err)
		}
	}
}

// Past MaxConns, a connection is closed at once and counted; one closed
// frees its place.
func TestListenerRefusesPastMaxConns(t *testing.T) {
	var refused atomic.Int64
	l, err := NewLimits(LimitsConfig{MaxConns: 2, Refused: func(r string) {
		if r == RefusedConns {
			refused.Add(1)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := l.Listener(raw)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1, c2 := dial(), dial()
	s1, s2 := <-accepted, <-accepted
	c3 := dial()
	// The third is closed by the server: its read ends.
	_ = c3.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c3.Read(make([]byte, 1)); err == nil || errors.Is(err, errTimeout(err)) {
		t.Fatalf("third connection read: %v, want closed by the server", err)
	}
	if refused.Load() != 1 {
		t.Fatalf("%d refused, want 1", refused.Load())
	}
	_ = s1.Close()
	_ = s1.Close() // twice: counted once
	c4 := dial()
	s4 := <-accepted
	for _, c := range []net.Conn{c1, c2, c3, c4, s2, s4} {
		_ = c.Close()
	}
}

// errTimeout returns err if it is a timeout, so that a timeout fails the
// test above rather than passing as a close.
func errTimeout(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return errors.New("not a timeout")
}

// The budgets: a connection's excess is refused RESOURCE_EXHAUSTED while
// another connection still enters, up to the listener's budget.
func TestGateBudgets(t *testing.T) {
	l, err := NewLimits(LimitsConfig{MaxInflightPerConn: 2, MaxInflight: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, b := &net.TCPAddr{Port: 1}, &net.TCPAddr{Port: 2}
	l.byAddr.Store(net.Addr(a), &connState{flow: newFlow(l.pool, 1, time.Hour)})
	l.byAddr.Store(net.Addr(b), &connState{flow: newFlow(l.pool, 1, time.Hour)})
	ga := l.Gate(peer.NewContext(context.Background(), &peer.Peer{Addr: a}))
	gb := l.Gate(peer.NewContext(context.Background(), &peer.Peer{Addr: b}))
	for range 2 {
		if err := ga.Enter(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ga.Enter(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "connection") {
		t.Fatalf("a's third: %v, want RESOURCE_EXHAUSTED for the connection", err)
	}
	if err := gb.Enter(); err != nil {
		t.Fatalf("b's first: %v", err)
	}
	if err := gb.Enter(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "node") {
		t.Fatalf("b's second: %v, want RESOURCE_EXHAUSTED for the node", err)
	}
	ga.Leave()
	if err := gb.Enter(); err != nil {
		t.Fatalf("b after a left one: %v", err)
	}
}

// Over the share of the memory limit, work is refused; below, admitted;
// without a limit, never refused.
func TestShedder(t *testing.T) {
	var used, limit atomic.Int64
	limit.Store(1000)
	s, err := NewShedder(ShedConfig{Share: 0.85, Limit: limit.Load, Used: used.Load})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLimits(LimitsConfig{Shed: s})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := l.Gate(context.Background())
	for _, c := range []struct {
		used, limit int64
		over        bool
	}{{800, 1000, false}, {851, 1000, true}, {851, 0, false}, {1 << 40, 1<<63 - 1, false}, {700, 1000, false}} {
		used.Store(c.used)
		limit.Store(c.limit)
		s.Read()
		err := g.Enter()
		if c.over != (status.Code(err) == codes.ResourceExhausted) {
			t.Errorf("used %d of %d: %v, want over=%v", c.used, c.limit, err, c.over)
		}
		if err == nil {
			g.Leave()
		}
	}
}

// The pool runs at most its size at once, reuses its workers, and ends
// them at Close.
func TestWorkersBounded(t *testing.T) {
	p := NewWorkers(3)
	hold := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		if !p.Go(func() { defer wg.Done(); <-hold }) {
			t.Fatal("refused within its size")
		}
	}
	if p.Go(func() {}) {
		t.Fatal("a fourth task ran on a pool of 3")
	}
	close(hold)
	wg.Wait()
	done := make(chan struct{})
	waitUntil(t, func() bool { return p.Go(func() { close(done) }) })
	<-done
	p.Close()
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
