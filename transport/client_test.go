package transport

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

func newTestPeerClient(t testing.TB, cfg PeerClientConfig) *PeerClient {
	t.Helper()
	if cfg.Self == "" {
		cfg.Self = "n1"
	}
	c, err := NewPeerClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// peerOf returns c's connection to m (nil if none).
func (c *PeerClient) peerOf(name string) *peerConn {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.peers[name]
}

func tbLimit(limit int64) bucket.Limit {
	return bucket.Limit{Algorithm: bucket.TokenBucket, Limit: limit, Period: time.Minute}
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

func TestPeerUnavailable(t *testing.T) {
	pm, err := NewPeerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The breaker is disabled: every call must reach the closed port.
	c := newTestPeerClient(t, PeerClientConfig{Timeout: 30 * time.Second, Metrics: pm, BreakerFailures: -1})
	gone := ring.Member{Name: "gone", GRPCAddr: closedAddr(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	item := limiter.Forwarded{Hash: 1, Limit: tbLimit(5), Cost: 1}
	start := time.Now()
	calls := map[string]func() error{
		"Check": func() error { return c.Check(ctx, gone, 0, []limiter.Forwarded{item}, make([]limiter.Answer, 1)) },
		"Acquire": func() error {
			_, _, err := c.Acquire(ctx, gone, 0, item, time.Second)
			return err
		},
		"Release": func() error {
			_, _, err := c.Release(ctx, gone, 0, item, store.LeaseID{ID: 1})
			return err
		},
		"Fetch": func() error {
			_, err := c.Fetch(ctx, gone, []uint64{1})
			return err
		},
		"Handoff": func() error { return c.Handoff(ctx, gone, nil, []int{1}) },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, limiter.ErrPeerUnavailable) || status.Code(err) != codes.Unavailable {
			t.Errorf("%s to a closed port: %v (code %v), want ErrPeerUnavailable with code Unavailable", name, err, status.Code(err))
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("failing took %v, want well under the 30s timeout", d)
	}
	if c.CircuitOpen("gone") {
		t.Error("a disabled breaker opened")
	}
	if rpcs := pm.Snapshot().CheckRPCs; rpcs != 1 {
		t.Errorf("CheckRPCs = %d, want 1", rpcs)
	}
}

// TestPeerCheckServerStops: a server that goes away fails the calls in
// flight and the queued ones with ErrPeerUnavailable.
func TestPeerCheckServerStops(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, srv := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{MaxInflight: 2, Timeout: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	item := []limiter.Forwarded{{Hash: 1, Limit: tbLimit(100), Cost: 1}}
	if err := c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)); err != nil {
		t.Fatal(err)
	}

	fake.mu.Lock()
	fake.gate = make(chan struct{})
	fake.mu.Unlock()
	defer close(fake.gate)
	const callers = 8
	errs := make(chan error, callers)
	for range callers {
		go func() { errs <- c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)) }()
	}
	waitFor(t, "calls in flight and queued", func() bool {
		rpcs, items := fake.checkStats()
		q := c.peerOf("owner").check0.queuedItems()
		return items-1+q == callers && (q == 0 || rpcs == 1+2)
	})
	srv.Stop()
	for range callers {
		if err := <-errs; !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Errorf("call while the server stopped: %v, want ErrPeerUnavailable", err)
		}
	}
}

func TestPeerClientCloseStopsEverything(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{})
	lisM, srv := startPeerServer(t, "owner", fake)
	c, err := NewPeerClient(PeerClientConfig{Self: "n1", MaxInflight: 2, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no deadline: only Close can end the calls
	const callers = 8
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			errs <- c.Check(ctx, lisM, 0, []limiter.Forwarded{{Hash: uint64(i), Limit: tbLimit(5), Cost: 1}}, make([]limiter.Answer, 1))
		}()
	}
	// A Fetch too (not blocked by the gate).
	fetched := make(chan error, 1)
	go func() {
		_, err := c.Fetch(ctx, lisM, []uint64{1})
		fetched <- err
	}()
	waitFor(t, "calls in flight and queued", func() bool {
		p := c.peerOf("owner")
		if p == nil {
			return false
		}
		rpcs, items := fake.checkStats()
		q := p.check0.queuedItems()
		return items+q == callers && (q == 0 || rpcs == 2)
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range callers {
		if err := <-errs; !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Errorf("call ended by Close: %v, want ErrPeerUnavailable", err)
		}
	}
	<-fetched // whatever it got (it may have ended before Close), it returned
	if err := c.Check(ctx, lisM, 0, []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5)}}, make([]limiter.Answer, 1)); !errors.Is(err, limiter.ErrPeerUnavailable) {
		t.Errorf("Check after Close: %v, want ErrPeerUnavailable", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	close(fake.gate)
	srv.Stop()
	goleak.VerifyNone(t, ignore)
}

func TestPeerClientReplacesAndForgetsConns(t *testing.T) {
	fakeA := newFakePeer(t, store.Config{})
	fakeB := newFakePeer(t, store.Config{})
	mA, _ := startPeerServer(t, "x", fakeA)
	mB, _ := startPeerServer(t, "x", fakeB)
	c := newTestPeerClient(t, PeerClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	check := func(m ring.Member) {
		t.Helper()
		if err := c.Check(ctx, m, 0, []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5), Cost: 1}}, make([]limiter.Answer, 1)); err != nil {
			t.Fatal(err)
		}
	}
	check(mA)
	check(mA)
	pA := c.peerOf("x")
	check(mB) // same name, new address
	pB := c.peerOf("x")
	if pA == pB || pB.addr != mB.GRPCAddr {
		t.Fatal("the connection was not replaced after an address change")
	}
	if s := pA.cc.GetState(); s != connectivity.Shutdown {
		t.Errorf("old conn state %v, want Shutdown", s)
	}
	if a, _ := fakeA.checkStats(); a != 2 {
		t.Errorf("A saw %d RPCs, want 2", a)
	}
	if b, _ := fakeB.checkStats(); b != 1 {
		t.Errorf("B saw %d RPCs, want 1", b)
	}

	c.Forget(func(name string) bool { return name != "x" })
	if c.peerOf("x") != nil {
		t.Error("Forget kept a removed peer")
	}
	if s := pB.cc.GetState(); s != connectivity.Shutdown {
		t.Errorf("forgotten conn state %v, want Shutdown", s)
	}
	check(mB) // a member that comes back gets a new conn
	if b, _ := fakeB.checkStats(); b != 2 {
		t.Errorf("B saw %d RPCs, want 2", b)
	}
}

func TestPeerClientConfigValidation(t *testing.T) {
	for _, cfg := range []PeerClientConfig{
		{},
		{Self: "n", Timeout: -1},
		{Self: "n", MaxBatch: -1},
		{Self: "n", MaxBatch: MaxPeerBatch + 1},
		{Self: "n", BatchWindow: -1},
		{Self: "n", MaxInflight: -1},
	} {
		if c, err := NewPeerClient(cfg); err == nil {
			_ = c.Close()
			t.Errorf("NewPeerClient(%+v) succeeded", cfg)
		}
	}
	c := newTestPeerClient(t, PeerClientConfig{Self: "n"})
	if c.cfg.Timeout != DefaultPeerTimeout || c.cfg.MaxBatch != DefaultPeerMaxBatch || c.cfg.MaxInflight != DefaultPeerMaxInflight {
		t.Errorf("defaults not applied: %+v", c.cfg)
	}
	ctx := context.Background()
	if err := c.Check(ctx, ring.Member{Name: "a", GRPCAddr: "127.0.0.1:1"}, 0, make([]limiter.Forwarded, 2), make([]limiter.Answer, 1)); err == nil {
		t.Error("Check with a short out succeeded")
	}
	if err := c.Check(ctx, ring.Member{Name: "a"}, 0, make([]limiter.Forwarded, 1), make([]limiter.Answer, 1)); !errors.Is(err, limiter.ErrPeerUnavailable) {
		t.Errorf("Check to a member without address: %v", err)
	}
}

// fastReconnect makes a client's connections retry within milliseconds,
// so that a test can wait for a restarted peer.
func fastReconnect() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
}

// servePeerOn serves svc on lis until cleanup.
func servePeerOn(t testing.TB, lis net.Listener, name string, svc PeerService, m *PeerMetrics) *grpc.Server {
	t.Helper()
	s := grpc.NewServer()
	registerPeer(t, s, svc, name, m)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-served
	})
	return s
}

func TestNewPeerClientBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg   PeerClientConfig
		field string
	}{
		{PeerClientConfig{}, "Self"},
		{PeerClientConfig{Self: "a", Timeout: -1}, "Timeout"},
		{PeerClientConfig{Self: "a", MaxBatch: MaxPeerBatch + 1}, "MaxBatch"},
		{PeerClientConfig{Self: "a", MaxBatch: -1}, "MaxBatch"},
		{PeerClientConfig{Self: "a", BatchWindow: -1}, "BatchWindow"},
		{PeerClientConfig{Self: "a", MaxInflight: -1}, "MaxInflight"},
		{PeerClientConfig{Self: "a", BreakerCooldown: -1}, "BreakerCooldown"},
	} {
		c, err := NewPeerClient(tc.cfg)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "PeerClientConfig."+tc.field+":") {
			t.Errorf("%+v: err %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
	}
}

// Connect brings a connection to each member up before any call to it.
func TestPeerClientConnect(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	c.Connect([]ring.Member{{Name: "n1", GRPCAddr: "127.0.0.1:1"}, m})
	p, err := c.peerFor(m)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.cc.GetState() != connectivity.Ready {
		if time.Now().After(deadline) {
			t.Fatalf("connection to %s is %v after Connect, want READY", m.Name, p.cc.GetState())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.mu.RLock()
	_, self := c.peers["n1"]
	c.mu.RUnlock()
	if self {
		t.Error("Connect made a connection to this node itself")
	}
}
