package transport

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// TestPeerBreakerOpensAndRecovers: against a port nobody listens on, the
// first BreakerFailures calls fail as unavailable, then calls fail at once
// with ErrCircuitOpen and send no RPC; once a peer listens there and the
// cooldown has passed, a call probes, succeeds and closes the circuit.
func TestPeerBreakerOpensAndRecovers(t *testing.T) {
	const failures, cooldown = 3, 5 * time.Second
	reg := prometheus.NewRegistry()
	pm, err := NewPeerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	clk := limitertest.NewClock(time.Unix(1_700_000_000, 0))
	c := newTestPeerClient(t, PeerClientConfig{
		Timeout: 10 * time.Second, BreakerFailures: failures, BreakerCooldown: cooldown,
		Clock: clk.Now, Metrics: pm, DialOptions: fastReconnect(),
	})
	owner := ring.Member{Name: "owner", GRPCAddr: closedAddr(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	item := limiter.Forwarded{Hash: 1, Limit: tbLimit(5), Cost: 1}
	check := func() error {
		return c.Check(ctx, owner, 0, []limiter.Forwarded{item}, make([]limiter.Answer, 1))
	}

	for i := range failures {
		if c.CircuitOpen("owner") {
			t.Fatalf("circuit open after %d failures, want %d", i, failures)
		}
		err := check()
		if !errors.Is(err, limiter.ErrPeerUnavailable) || errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("call %d: %v, want ErrPeerUnavailable without ErrCircuitOpen", i, err)
		}
	}
	if !c.CircuitOpen("owner") {
		t.Fatalf("circuit closed after %d failures", failures)
	}
	vals := metricValues(t, reg)
	if vals["sluice_peer_circuit_open{owner}"] != 1 || vals["sluice_peer_circuit_opened_total"] != 1 {
		t.Errorf("circuit_open{owner} = %v, opened_total = %v; want 1, 1",
			vals["sluice_peer_circuit_open{owner}"], vals["sluice_peer_circuit_opened_total"])
	}
	sent, failed := peerRPCs(vals)
	if sent != failures || failed != failures {
		t.Fatalf("%v RPCs sent, %v failed; want %d each", sent, failed, failures)
	}

	// Open: every method fails at once, without an RPC.
	rejected := func(when string) {
		t.Helper()
		calls := map[string]func() error{
			"Check": check,
			"Acquire": func() error {
				_, _, err := c.Acquire(ctx, owner, 0, item, time.Second)
				return err
			},
			"Release": func() error {
				_, _, err := c.Release(ctx, owner, 0, item, store.LeaseID{ID: 1})
				return err
			},
			"Fetch": func() error {
				_, err := c.Fetch(ctx, owner, []uint64{1})
				return err
			},
			"Handoff": func() error { return c.Handoff(ctx, owner, nil, []int{1}) },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, ErrCircuitOpen) || !errors.Is(err, limiter.ErrPeerUnavailable) {
				t.Errorf("%s %s: %v, want ErrCircuitOpen and ErrPeerUnavailable", name, when, err)
			}
		}
		if s, f := peerRPCs(metricValues(t, reg)); s != sent || f != failed {
			t.Errorf("%s: RPCs sent %v -> %v, failed %v -> %v; want none", when, sent, s, failed, f)
		}
	}
	rejected("while open")

	// The peer comes back on the same address.
	lis, err := net.Listen("tcp", owner.GRPCAddr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", owner.GRPCAddr, err)
	}
	fake := newFakePeer(t, store.Config{})
	servePeerOn(t, lis, "owner", fake, nil)
	p := c.peerOf("owner")
	waitFor(t, "the connection to the restarted peer", func() bool {
		s := p.cc.GetState()
		if s == connectivity.Idle {
			p.cc.Connect()
		}
		return s == connectivity.Ready
	})
	clk.Advance(cooldown - 1)
	rejected("just before the cooldown ends") // the peer is up, but no probe yet
	if rpcs, _ := fake.checkStats(); rpcs != 0 {
		t.Fatalf("the peer saw %d Check RPCs while the circuit was open", rpcs)
	}

	if !c.CircuitRejects("owner") {
		t.Error("CircuitRejects false just before the cooldown ends")
	}
	clk.Advance(1)
	// The cooldown has ended and no call has probed yet: the circuit is
	// still open, but it rejects nothing (the node shows the peer alive).
	if !c.CircuitOpen("owner") || c.CircuitRejects("owner") {
		t.Errorf("after the cooldown, before a probe: CircuitOpen %v, CircuitRejects %v; want true, false",
			c.CircuitOpen("owner"), c.CircuitRejects("owner"))
	}
	if err := check(); err != nil {
		t.Fatalf("probe after the cooldown: %v", err)
	}
	if c.CircuitOpen("owner") {
		t.Error("circuit still open after a successful probe")
	}
	if err := check(); err != nil {
		t.Fatalf("call after the circuit closed: %v", err)
	}
	if rpcs, _ := fake.checkStats(); rpcs != 2 {
		t.Errorf("the peer saw %d Check RPCs, want 2", rpcs)
	}
	vals = metricValues(t, reg)
	if vals["sluice_peer_circuit_open{owner}"] != 0 || vals["sluice_peer_circuit_opened_total"] != 1 {
		t.Errorf("after recovery circuit_open{owner} = %v, opened_total = %v; want 0, 1",
			vals["sluice_peer_circuit_open{owner}"], vals["sluice_peer_circuit_opened_total"])
	}

	c.Forget(func(string) bool { return false })
	if _, ok := metricValues(t, reg)["sluice_peer_circuit_open{owner}"]; ok {
		t.Error("Forget kept the peer's circuit gauge")
	}
}

// TestPeerBreakerFailsQueuedBatch: calls queued behind the RPC whose
// failure opens the circuit fail at once with ErrCircuitOpen, unsent.
func TestPeerBreakerFailsQueuedBatch(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{})
	defer close(fake.gate)
	m, srv := startPeerServer(t, "owner", fake)
	pm, err := NewPeerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestPeerClient(t, PeerClientConfig{MaxInflight: 1, Timeout: time.Minute, BreakerFailures: 1, Metrics: pm})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	item := []limiter.Forwarded{{Hash: 1, Limit: tbLimit(100), Cost: 1}}

	first := make(chan error, 1)
	go func() { first <- c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)) }()
	waitFor(t, "the first call at the server", func() bool { rpcs, _ := fake.checkStats(); return rpcs == 1 })
	const queued = 4
	errs := make(chan error, queued)
	for range queued {
		go func() { errs <- c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)) }()
	}
	waitFor(t, "the calls to queue", func() bool { return c.peerOf("owner").check0.queuedItems() == queued })
	srv.Stop() // the RPC in flight fails: Unavailable
	if err := <-first; !errors.Is(err, limiter.ErrPeerUnavailable) || errors.Is(err, ErrCircuitOpen) {
		t.Errorf("call in flight: %v, want ErrPeerUnavailable without ErrCircuitOpen", err)
	}
	for range queued {
		if err := <-errs; !errors.Is(err, ErrCircuitOpen) || !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Errorf("queued call: %v, want ErrCircuitOpen and ErrPeerUnavailable", err)
		}
	}
	if n := pm.Snapshot().CheckRPCs; n != 1 {
		t.Errorf("%d Check RPCs sent, want only the first", n)
	}
}

// stallingPeer is a fakePeer whose Check, Acquire and Fetch answer only
// once release is closed, whatever their deadline: they signal arrived
// (without blocking) and wait.
type stallingPeer struct {
	*fakePeer
	arrived chan struct{}
	release chan struct{}
}

func (s *stallingPeer) stall() {
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	<-s.release
}

func (s *stallingPeer) CheckForwarded(context.Context, string, int, []limiter.Forwarded, []limiter.Answer) error {
	s.stall()
	return nil
}

// drain empties s.arrived.
func (s *stallingPeer) drain() {
	for {
		select {
		case <-s.arrived:
		default:
			return
		}
	}
}

func (s *stallingPeer) AcquireForwarded(context.Context, string, int, limiter.Forwarded, time.Duration) (limiter.Answer, store.LeaseID, error) {
	s.stall()
	return limiter.Answer{}, store.LeaseID{}, nil
}

func (s *stallingPeer) FetchMoved(context.Context, string, []uint64) ([]store.Entry, error) {
	s.stall()
	return nil, nil
}

// TestPeerBreakerCallerCancelDoesNotOpen: RPCs cut short by their caller
// (cancelled, or a deadline before the client's Timeout) do not count
// against the peer, while an RPC that hits the client's Timeout does.
func TestPeerBreakerCallerCancelDoesNotOpen(t *testing.T) {
	stall := &stallingPeer{fakePeer: newFakePeer(t, store.Config{}), arrived: make(chan struct{}, 1), release: make(chan struct{})}
	m, _ := startPeerServer(t, "owner", stall)
	defer close(stall.release) // before the server stops
	// One failure would open the circuit.
	c := newTestPeerClient(t, PeerClientConfig{Timeout: time.Minute, BreakerFailures: 1})
	item := limiter.Forwarded{Hash: 1, Limit: tbLimit(100), Cost: 1}
	lease := limiter.Forwarded{Hash: 2, Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}, Cost: 1}
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 20*time.Millisecond)
	}
	// A call whose RPC ends at the caller's deadline returns either the
	// caller's ctx.Err() or the RPC's DeadlineExceeded, whichever comes
	// first (the server, which learns the deadline from the request, may
	// end the RPC a hair before the caller's context does).
	deadline := func(err error) bool {
		return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
	}
	for round := range 3 {
		// Check and Fetch, batched: the RPC's deadline is the caller's.
		ctx, cancel := short()
		if err := c.Check(ctx, m, 0, []limiter.Forwarded{item}, make([]limiter.Answer, 1)); !deadline(err) {
			t.Fatalf("round %d: Check with a short deadline: %v, want a deadline error", round, err)
		}
		cancel()
		ctx, cancel = short()
		if _, err := c.Fetch(ctx, m, []uint64{1}); !deadline(err) {
			t.Fatalf("round %d: Fetch with a short deadline: %v, want a deadline error", round, err)
		}
		cancel()
		// Acquire: a short deadline, then a cancel while in flight.
		ctx, cancel = short()
		if _, _, err := c.Acquire(ctx, m, 0, lease, time.Second); !deadline(err) {
			t.Fatalf("round %d: Acquire with a short deadline: %v, want a deadline error", round, err)
		}
		cancel()
		stall.drain()
		ctx, cancel = context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, _, err := c.Acquire(ctx, m, 0, lease, time.Second)
			done <- err
		}()
		select {
		case <-stall.arrived:
		case err := <-done:
			t.Fatalf("round %d: Acquire returned %v before reaching the peer", round, err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: cancelled Acquire: %v, want context.Canceled", round, err)
		}
		// The batched RPCs record their outcome when their senders end.
		p := c.peerOf("owner")
		waitFor(t, "the senders to finish", func() bool { return p.check0.idle() && p.fetch.idle() })
		if c.CircuitOpen("owner") {
			t.Fatalf("round %d: caller cancellations opened the circuit", round)
		}
	}

	// The same stalled peer against the client's own Timeout: a failure.
	c2 := newTestPeerClient(t, PeerClientConfig{Timeout: 50 * time.Millisecond, BreakerFailures: 1})
	if _, _, err := c2.Acquire(context.Background(), m, 0, lease, time.Second); !errors.Is(err, limiter.ErrPeerUnavailable) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Acquire past the client's Timeout: %v, want ErrPeerUnavailable with DeadlineExceeded", err)
	}
	if !c2.CircuitOpen("owner") {
		t.Error("an RPC past the client's Timeout did not open the circuit")
	}
	if _, _, err := c2.Acquire(context.Background(), m, 0, lease, time.Second); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("Acquire on an open circuit: %v, want ErrCircuitOpen", err)
	}
}

// TestPeerBreakerAnswersDoNotOpen: per-item errors in an answer are not
// failures.
func TestPeerBreakerAnswersDoNotOpen(t *testing.T) {
	fake := newFakePeer(t, store.Config{Shards: 1, MaxBytes: 1})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{BreakerFailures: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 3 {
		out := make([]limiter.Answer, 2)
		items := []limiter.Forwarded{{Hash: uint64(i), Limit: tbLimit(5), Cost: 1}, {Hash: 100, Limit: tbLimit(5), Cost: 10}}
		if err := c.Check(ctx, m, 0, items, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Err == nil || out[1].Err == nil {
			t.Fatalf("answers %+v, want per-item errors", out)
		}
		if _, _, err := c.Acquire(ctx, m, 0, limiter.Forwarded{Hash: 5, Limit: tbLimit(5), Cost: 1}, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if c.CircuitOpen("owner") {
		t.Error("per-item errors opened the circuit")
	}
}

func TestPeerBreakerConfig(t *testing.T) {
	if c, err := NewPeerClient(PeerClientConfig{Self: "n", BreakerCooldown: -1}); err == nil {
		_ = c.Close()
		t.Error("a negative BreakerCooldown was accepted")
	}
	c := newTestPeerClient(t, PeerClientConfig{Self: "n"})
	if c.cfg.BreakerFailures != DefaultPeerBreakerFailures || c.cfg.BreakerCooldown != DefaultPeerBreakerCooldown || c.cfg.Clock == nil {
		t.Errorf("breaker defaults not applied: %+v", c.cfg)
	}
	if c.CircuitOpen("nobody") {
		t.Error("CircuitOpen of an unknown peer")
	}
}
