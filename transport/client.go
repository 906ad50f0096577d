package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Defaults of PeerClientConfig.
const (
	DefaultPeerTimeout     = 500 * time.Millisecond
	DefaultPeerMaxBatch    = 512
	DefaultPeerMaxInflight = 4
	// DefaultPeerBreakerFailures and DefaultPeerBreakerCooldown are the
	// defaults of BreakerFailures and BreakerCooldown.
	DefaultPeerBreakerFailures = 3
	DefaultPeerBreakerCooldown = time.Second
)

// PeerClientConfig configures a PeerClient. Zero fields take their
// defaults.
type PeerClientConfig struct {
	// Self is this node's name, sent as the caller of every RPC. Required.
	Self string
	// Timeout is the deadline of a peer RPC (bounded by the caller's
	// context); default 500ms. Handoff RPCs get 5×Timeout.
	Timeout time.Duration
	// MaxBatch is the most items in one forwarded Check RPC; default 512,
	// at most MaxPeerBatch. A call with more items is split.
	MaxBatch int
	// BatchWindow is an extra wait to fill a Check batch: a sender that
	// finds fewer than MaxBatch items queued waits up to BatchWindow for
	// more. The default 0 batches adaptively only: a call to an idle peer
	// is sent at once.
	BatchWindow time.Duration
	// MaxInflight is the most concurrent Check RPCs (and Fetch RPCs) per
	// peer; default 4. Calls beyond it queue and are coalesced.
	MaxInflight int
	// BreakerFailures is the number of consecutive failed RPCs to a peer
	// that open its circuit breaker; default 3. An RPC fails when the peer
	// is not reached or does not answer within Timeout (gRPC codes
	// Unavailable and DeadlineExceeded, connection errors); an RPC that
	// ends because its caller's context ended, an error the peer answers
	// with (ResourceExhausted, ...) and per-item errors are not failures,
	// and any answer resets the count. While the circuit is open, calls to
	// the peer fail at once, without an RPC, with an error wrapping both
	// limiter.ErrPeerUnavailable and ErrCircuitOpen. BreakerCooldown after
	// it opened, one RPC (the probe) is let through: if it succeeds the
	// circuit closes, if it fails the circuit stays open for another
	// cooldown. A negative BreakerFailures disables the breaker.
	BreakerFailures int
	// BreakerCooldown is how long an open circuit rejects calls before it
	// lets a probe through; default 1s.
	BreakerCooldown time.Duration
	// Clock is the time source of the breakers' cooldowns; nil means
	// time.Now. It is meant for tests: RPC deadlines and BatchWindow always
	// use real time.
	Clock func() time.Time
	// Metrics records RPCs and batch sizes; nil records nothing.
	Metrics *PeerMetrics
	// DialOptions are passed to grpc.NewClient; the default is insecure
	// transport credentials.
	DialOptions []grpc.DialOption
	// TracerProvider, if set, traces the peer RPCs (an otelgrpc client
	// stats handler) and sends their trace context to the owner; nil
	// installs no handler at all.
	TracerProvider trace.TracerProvider
	// Epoch, if set, is this node's epoch of the ring (limiter.Config.Epoch),
	// read once per RPC and sent in every request that carries keys; nil
	// sends 0 (unknown: served as before epochs).
	Epoch func() uint64
}

// PeerClient reaches the other nodes of the cluster over sluice.v1.Peer; it
// implements limiter.Peers. It keeps one gRPC connection per peer, created
// on first use, and coalesces concurrent Check (and Fetch) calls to the same
// peer into few RPCs (see batcher). It is safe for concurrent use.
type PeerClient struct {
	cfg       PeerClientConfig
	m         *PeerMetrics
	ctx       context.Context // cancelled by Close; parent of batched RPCs
	cancel    context.CancelFunc
	wg        sync.WaitGroup // sender goroutines
	checkPool wire.Pool[limiter.Forwarded, limiter.Answer]
	fetchPool wire.Pool[uint64, store.Entry]

	mu     sync.RWMutex
	peers  map[string]*peerConn // by name
	closed bool
}

var _ limiter.Peers = (*PeerClient)(nil)

// errClientClosed answers calls made after (or queued at) Close.
var errClientClosed = fmt.Errorf("%w: %w: peer client closed", limiter.ErrPeerUnavailable, limiter.ErrNotSent)

// NewPeerClient builds a PeerClient. It opens no connection yet.
func NewPeerClient(cfg PeerClientConfig) (*PeerClient, error) {
	switch {
	case cfg.Self == "":
		return nil, fmt.Errorf("%w: PeerClientConfig.Self: is required", ErrInvalidConfig)
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("%w: PeerClientConfig.Timeout: must be >= 0, got %v", ErrInvalidConfig, cfg.Timeout)
	case cfg.MaxBatch < 0 || cfg.MaxBatch > MaxPeerBatch:
		return nil, fmt.Errorf("%w: PeerClientConfig.MaxBatch: must be in [0, %d], got %d", ErrInvalidConfig, MaxPeerBatch, cfg.MaxBatch)
	case cfg.BatchWindow < 0:
		return nil, fmt.Errorf("%w: PeerClientConfig.BatchWindow: must be >= 0, got %v", ErrInvalidConfig, cfg.BatchWindow)
	case cfg.MaxInflight < 0:
		return nil, fmt.Errorf("%w: PeerClientConfig.MaxInflight: must be >= 0, got %d", ErrInvalidConfig, cfg.MaxInflight)
	case cfg.BreakerCooldown < 0:
		return nil, fmt.Errorf("%w: PeerClientConfig.BreakerCooldown: must be >= 0, got %v", ErrInvalidConfig, cfg.BreakerCooldown)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultPeerTimeout
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultPeerMaxBatch
	}
	if cfg.MaxInflight == 0 {
		cfg.MaxInflight = DefaultPeerMaxInflight
	}
	if cfg.BreakerFailures == 0 {
		cfg.BreakerFailures = DefaultPeerBreakerFailures
	}
	if cfg.BreakerCooldown == 0 {
		cfg.BreakerCooldown = DefaultPeerBreakerCooldown
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if len(cfg.DialOptions) == 0 {
		cfg.DialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	// The vtprotobuf codec first (caller options can override it); append copies.
	// Fixed windows, as on the servers (wire.FlowWindow): no BDP pings.
	cfg.DialOptions = append([]grpc.DialOption{wire.DialOption(),
		grpc.WithInitialWindowSize(wire.FlowWindow), grpc.WithInitialConnWindowSize(wire.FlowWindow)}, cfg.DialOptions...)
	if cfg.TracerProvider != nil {
		cfg.DialOptions = append(cfg.DialOptions, tracingDialOption(cfg.TracerProvider))
	}
	cfg.DialOptions = append(cfg.DialOptions, protocolDialOptions(PeerProtocol)...)
	// Surface bad dial options now rather than on the first forward.
	probe, err := grpc.NewClient("passthrough:///sluice-peer-probe", cfg.DialOptions...)
	if err != nil {
		return nil, fmt.Errorf("%w: PeerClientConfig.DialOptions: %w", ErrInvalidConfig, err)
	}
	_ = probe.Close()
	c := &PeerClient{
		cfg:   cfg,
		m:     cfg.Metrics,
		peers: make(map[string]*peerConn),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close fails queued calls, aborts RPCs in flight, waits for every sender
// goroutine and closes the connections. Calls after Close fail with an
// error wrapping limiter.ErrPeerUnavailable.
func (c *PeerClient) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	peers := c.peers
	c.peers = nil
	c.mu.Unlock()
	c.cancel()
	for _, p := range peers {
		p.br.retire()
		p.closeBatchers(errClientClosed)
	}
	c.wg.Wait()
	var errs []error
	for _, p := range peers {
		if err := p.cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("transport: closing conn to %s: %w", p.name, err))
		}
	}
	return errors.Join(errs...)
}

// Forget closes the connections of the peers for which keep returns false
// (the node calls it when membership changes with "is still a member").
// Their queued and in-flight calls fail with limiter.ErrPeerUnavailable; a
// later call to such a peer opens a new connection, with a closed circuit.
// Their sluice_peer_circuit_open series are removed. keep is called with
// the client's lock held and must not call the client.
func (c *PeerClient) Forget(keep func(name string) bool) {
	var gone []*peerConn
	c.mu.Lock()
	for name, p := range c.peers {
		if !keep(name) {
			delete(c.peers, name)
			gone = append(gone, p)
			// Under c.mu, so that a new peerConn of the same name (made
			// under c.mu too) sets its gauge after this removal.
			p.br.retire()
			c.m.forgetPeer(name)
		}
	}
	c.mu.Unlock()
	for _, p := range gone {
		p.retire(fmt.Errorf("%w: %s left the cluster", limiter.ErrPeerUnavailable, p.name))
	}
}

// Connect starts connecting to each of members (this node excepted) that
// it has no connection to yet, without waiting: a node that joins, or
// restarts, has its connections up before the checks and fetches of the
// keys it takes over need them, instead of paying for the first one then.
// Errors are those of a call: the next call reports them.
func (c *PeerClient) Connect(members []ring.Member) {
	for _, m := range members {
		if m.Name == c.cfg.Self {
			continue
		}
		if p, err := c.peerFor(m); err == nil {
			p.cc.Connect()
		}
	}
}

// CircuitOpen reports whether the circuit breaker of the peer named name is
// open (calls to it fail at once) or half-open (a probe is, or is about to
// be, in flight). It is false for a peer the client has no connection to,
// and always false when the breaker is disabled.
func (c *PeerClient) CircuitOpen(name string) bool {
	c.mu.RLock()
	p := c.peers[name]
	c.mu.RUnlock()
	return p != nil && p.br.isOpen()
}

// CircuitRejects reports whether the circuit breaker of the peer named
// name rejects calls now: it is open and its cooldown has not ended, or its
// probe is in flight. An open circuit whose cooldown has ended admits the
// next call as its probe, so it says nothing against the peer any more: a
// peer that no call has gone to since (no check of its keys came) would
// otherwise be shown suspect for good.
func (c *PeerClient) CircuitRejects(name string) bool {
	c.mu.RLock()
	p := c.peers[name]
	c.mu.RUnlock()
	return p != nil && p.br.rejects()
}

// peerFor returns the connection to m, creating it on first use and
// replacing it when m's address changed.
func (c *PeerClient) peerFor(m ring.Member) (*peerConn, error) {
	c.mu.RLock()
	p := c.peers[m.Name]
	closed := c.closed
	c.mu.RUnlock()
	if p != nil && p.addr == m.GRPCAddr {
		return p, nil
	}
	if closed {
		return nil, errClientClosed
	}
	if m.Name == "" || m.GRPCAddr == "" {
		return nil, fmt.Errorf("%w: %w: member %q has no name or gRPC address", limiter.ErrPeerUnavailable, limiter.ErrNotSent, m.Name)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errClientClosed
	}
	old := c.peers[m.Name]
	if old != nil && old.addr == m.GRPCAddr {
		c.mu.Unlock()
		return old, nil
	}
	cc, err := grpc.NewClient(m.GRPCAddr, c.cfg.DialOptions...)
	if err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %w: %s (%s): %w", limiter.ErrPeerUnavailable, limiter.ErrNotSent, m.Name, m.GRPCAddr, err)
	}
	if old != nil {
		old.br.retire() // before the new breaker sets the peer's gauge
	}
	p = c.newPeer(m, cc)
	c.peers[m.Name] = p
	c.mu.Unlock()
	if old != nil {
		old.retire(fmt.Errorf("%w: %s moved from %s to %s", limiter.ErrPeerUnavailable, m.Name, old.addr, m.GRPCAddr))
	}
	return p, nil
}
