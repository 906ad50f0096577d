package transport

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/codec"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
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

// Bounds of the RPCs other than Check.
const (
	// fetchBatch is the most hashes in one Fetch RPC.
	fetchBatch = 256
	// fetchRecvBytes is the largest Fetch response accepted: a sliding
	// log state can be large (MaxSlidingLogLimit entries).
	fetchRecvBytes = 128 << 20
	// handoffBytes and handoffStates bound one Handoff RPC, well below
	// gRPC's default 4 MiB limit on the receiver.
	handoffBytes  = 1 << 20
	handoffStates = 4096
	// handoffTimeouts is a Handoff RPC's deadline in units of Timeout.
	handoffTimeouts = 5
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
var errClientClosed = fmt.Errorf("%w: peer client closed", limiter.ErrPeerUnavailable)

// NewPeerClient builds a PeerClient. It opens no connection yet.
func NewPeerClient(cfg PeerClientConfig) (*PeerClient, error) {
	switch {
	case cfg.Self == "":
		return nil, errors.New("transport: PeerClientConfig.Self is required")
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("transport: PeerClientConfig.Timeout must be >= 0, got %v", cfg.Timeout)
	case cfg.MaxBatch < 0 || cfg.MaxBatch > MaxPeerBatch:
		return nil, fmt.Errorf("transport: PeerClientConfig.MaxBatch must be in [0, %d], got %d", MaxPeerBatch, cfg.MaxBatch)
	case cfg.BatchWindow < 0:
		return nil, fmt.Errorf("transport: PeerClientConfig.BatchWindow must be >= 0, got %v", cfg.BatchWindow)
	case cfg.MaxInflight < 0:
		return nil, fmt.Errorf("transport: PeerClientConfig.MaxInflight must be >= 0, got %d", cfg.MaxInflight)
	case cfg.BreakerCooldown < 0:
		return nil, fmt.Errorf("transport: PeerClientConfig.BreakerCooldown must be >= 0, got %v", cfg.BreakerCooldown)
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
	// Fixed windows, as on the servers (FlowWindow): no BDP pings.
	cfg.DialOptions = append([]grpc.DialOption{codec.DialOption(),
		grpc.WithInitialWindowSize(FlowWindow), grpc.WithInitialConnWindowSize(FlowWindow)}, cfg.DialOptions...)
	// Surface bad dial options now rather than on the first forward.
	probe, err := grpc.NewClient("passthrough:///sluice-peer-probe", cfg.DialOptions...)
	if err != nil {
		return nil, fmt.Errorf("transport: PeerClientConfig.DialOptions: %w", err)
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
		return nil, fmt.Errorf("%w: member %q has no name or gRPC address", limiter.ErrPeerUnavailable, m.Name)
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
		return nil, fmt.Errorf("%w: %s (%s): %w", limiter.ErrPeerUnavailable, m.Name, m.GRPCAddr, err)
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

// checkBatcher and fetchBatcher are the batchers of a peer.
type (
	checkBatcher = batcher[limiter.Forwarded, limiter.Answer]
	fetchBatcher = batcher[uint64, store.Entry]
	checkCall    = wire.Call[limiter.Forwarded, limiter.Answer]
	fetchCall    = wire.Call[uint64, store.Entry]
)

// peerConn is the client side of one peer: its connection, batchers and
// circuit breaker.
type peerConn struct {
	c          *PeerClient
	name, addr string
	cc         *grpc.ClientConn
	rpc        sluicev1.PeerClient
	check0     *checkBatcher // hops 0, the common case
	fetch      *fetchBatcher
	br         *breaker // nil if disabled
	circuitErr error    // answers the calls the breaker rejects
	mux        checkMux // Check calls on a stream

	mu        sync.Mutex
	checkHops map[uint32]*checkBatcher // hops > 0; requests carry one hops value
	closed    bool
}

// newPeer builds the client side of m. c.mu is held.
func (c *PeerClient) newPeer(m ring.Member, cc *grpc.ClientConn) *peerConn {
	p := &peerConn{c: c, name: m.Name, addr: m.GRPCAddr, cc: cc, rpc: sluicev1.NewPeerClient(cc)}
	p.mux.p = p
	p.circuitErr = fmt.Errorf("%w: %w: %s", limiter.ErrPeerUnavailable, ErrCircuitOpen, m.Name)
	if c.cfg.BreakerFailures > 0 {
		var notify func(open, fromClosed bool)
		if c.m != nil {
			gauge := c.m.circuitOpen.WithLabelValues(m.Name)
			gauge.Set(0)
			opened := c.m.circuitOpened
			notify = func(open, fromClosed bool) {
				if open {
					gauge.Set(1)
					if fromClosed {
						opened.Inc()
					}
				} else {
					gauge.Set(0)
				}
			}
		}
		p.br = newBreaker(c.cfg.BreakerFailures, c.cfg.BreakerCooldown, c.cfg.Clock, notify)
	}
	p.check0 = p.newCheckBatcher(0)
	p.fetch = &fetchBatcher{
		ctx: c.ctx, wg: &c.wg, pool: &c.fetchPool,
		maxBatch: fetchBatch, maxInflight: c.cfg.MaxInflight, timeout: c.cfg.Timeout,
		flush: p.sendFetch,
		full:  make(chan struct{}, 1),
	}
	return p
}

func (p *peerConn) newCheckBatcher(hops uint32) *checkBatcher {
	c := p.c
	return &checkBatcher{
		ctx: c.ctx, wg: &c.wg, pool: &c.checkPool,
		maxBatch: c.cfg.MaxBatch, maxInflight: c.cfg.MaxInflight,
		window: c.cfg.BatchWindow, timeout: c.cfg.Timeout,
		flush: func(ctx context.Context, calls []*checkCall, n int) { p.sendCheck(ctx, hops, calls, n) },
		full:  make(chan struct{}, 1),
	}
}

// checkBatcher returns the batcher for requests of the given hop count.
func (p *peerConn) checkBatcher(hops uint32) (*checkBatcher, error) {
	if hops == 0 {
		return p.check0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClientClosed
	}
	b := p.checkHops[hops]
	if b == nil {
		if p.checkHops == nil {
			p.checkHops = make(map[uint32]*checkBatcher)
		}
		b = p.newCheckBatcher(hops)
		p.checkHops[hops] = b
	}
	return b, nil
}

// closeBatchers fails queued calls with err and refuses new ones.
func (p *peerConn) closeBatchers(err error) {
	p.mu.Lock()
	p.closed = true
	bs := make([]*checkBatcher, 0, 1+len(p.checkHops))
	bs = append(bs, p.check0)
	for _, b := range p.checkHops {
		bs = append(bs, b)
	}
	p.mu.Unlock()
	for _, b := range bs {
		b.close(err)
	}
	p.fetch.close(err)
}

// retire closes a peer that was removed from the client's map: its calls
// fail with err and its connection is closed (its senders see their RPCs
// fail and exit).
func (p *peerConn) retire(err error) {
	p.closeBatchers(err)
	_ = p.cc.Close()
}

// unavailable wraps an RPC error: errors.Is(err, limiter.ErrPeerUnavailable)
// holds and status.Code(err) is the RPC's code.
func (p *peerConn) unavailable(method string, err error) error {
	return fmt.Errorf("%w: %s %s (%s): %w", limiter.ErrPeerUnavailable, method, p.name, p.addr, err)
}

// callErr is the error of a direct (unbatched) RPC: the caller's own
// ctx.Err() when its context ended, otherwise the RPC error wrapped.
func (p *peerConn) callErr(ctx context.Context, method int, err error) error {
	p.c.m.rpcError(method)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return p.unavailable(peerMethods[method], err)
}

// Check applies items on node to and fills out[i] for items[i]. Calls to
// the same node are coalesced; see PeerClientConfig. An error means the
// node did not answer (it wraps limiter.ErrPeerUnavailable, and also
// ErrCircuitOpen when the node's circuit breaker is open and no RPC was
// sent), or is ctx.Err() when ctx ended first; out is then unspecified.
func (c *PeerClient) Check(ctx context.Context, to ring.Member, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	if len(items) == 0 {
		return nil
	}
	if len(out) < len(items) {
		return fmt.Errorf("transport: PeerClient.Check: %d answers for %d items", len(out), len(items))
	}
	if hops < 0 || hops > maxPeerHops {
		return fmt.Errorf("transport: PeerClient.Check: hops %d out of [0, %d]", hops, maxPeerHops)
	}
	p, err := c.peerFor(to)
	if err != nil {
		return err
	}
	if p.br.rejects() { // fail at once, without queueing
		return p.circuitErr
	}
	b, err := p.checkBatcher(uint32(hops))
	if err != nil {
		return err
	}
	maxBatch := c.cfg.MaxBatch
	if len(items) <= maxBatch {
		pc := b.get()
		pc.In, pc.Out = items, out[:len(items)]
		one := [1]*checkCall{pc}
		return b.do(ctx, one[:], nil)
	}
	calls := make([]*checkCall, 0, (len(items)+maxBatch-1)/maxBatch)
	for off := 0; off < len(items); off += maxBatch {
		end := min(off+maxBatch, len(items))
		pc := b.get()
		pc.In, pc.Out = items[off:end], out[off:end]
		calls = append(calls, pc)
	}
	return b.do(ctx, calls, nil)
}

// sendCheck is the Check batcher's flush: one RPC for calls, unless the
// circuit is open.
func (p *peerConn) sendCheck(ctx context.Context, hops uint32, calls []*checkCall, _ int) {
	callers := callersDeadline(ctx, calls)
	live, n, tk, ok := admitBatch(p, calls)
	if !ok {
		return
	}
	// One allocation each for the items, their limits and their pointers.
	items := make([]sluicev1.PeerItem, n)
	limits := make([]sluicev1.PeerLimit, n)
	req := &sluicev1.PeerCheckRequest{From: p.c.cfg.Self, Hops: hops, Items: make([]*sluicev1.PeerItem, n)}
	k := 0
	for _, pc := range live {
		for i := range pc.In {
			req.Items[k] = toPeerItem(&items[k], &limits[k], &pc.In[i])
			k++
		}
	}
	p.c.m.checkRPC(n)
	results, err := p.mux.call(ctx, req)
	p.br.record(tk, rpcOutcome(err, callers))
	if err == nil && len(results) != n {
		err = status.Errorf(codes.Internal, "peer answered %d results for %d items", len(results), n)
	}
	if err != nil {
		p.c.m.rpcError(peerCheck)
		wire.FailAll(live, p.unavailable("Check", err))
		return
	}
	for _, pc := range live {
		res := results[:len(pc.In)]
		results = results[len(pc.In):]
		if pc.Claim() {
			for i := range pc.Out {
				fromPeerResult(&pc.Out[i], res[i])
			}
			pc.Answer(nil) // pc may be reused from here on
		}
	}
}

// admitBatch is the start of every batched flush: it drops the calls whose
// callers left, then asks p's circuit breaker for one RPC. It reports false
// when there is nothing to send or the circuit is open (the live calls have
// then failed with the circuit error).
func admitBatch[I, O any](p *peerConn, calls []*wire.Call[I, O]) ([]*wire.Call[I, O], int, breakerTicket, bool) {
	live, n := wire.Live(calls)
	if len(live) == 0 {
		var none breakerTicket
		return nil, 0, none, false
	}
	tk, ok := p.br.allow()
	if !ok {
		wire.FailAll(live, p.circuitErr)
		return nil, 0, tk, false
	}
	return live, n, tk, true
}

// Acquire takes a lease on node to.
func (c *PeerClient) Acquire(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, uint64, error) {
	if hops < 0 || hops > maxPeerHops {
		return limiter.Answer{}, 0, fmt.Errorf("transport: PeerClient.Acquire: hops %d out of [0, %d]", hops, maxPeerHops)
	}
	p, err := c.peerFor(to)
	if err != nil {
		return limiter.Answer{}, 0, err
	}
	tk, ok := p.br.allow()
	if !ok {
		return limiter.Answer{}, 0, p.circuitErr
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var it sluicev1.PeerItem
	var lim sluicev1.PeerLimit
	req := &sluicev1.PeerAcquireRequest{From: c.cfg.Self, Hops: uint32(hops), Item: toPeerItem(&it, &lim, &item), TtlNs: int64(ttl)}
	c.m.rpc(peerAcquire)
	resp, err := p.rpc.Acquire(rctx, req)
	p.br.record(tk, directOutcome(ctx, rctx, err))
	if err != nil {
		return limiter.Answer{}, 0, p.callErr(ctx, peerAcquire, err)
	}
	var a limiter.Answer
	fromPeerResult(&a, resp.GetResult())
	return a, resp.GetLeaseId(), nil
}

// Release returns a lease on node to.
func (c *PeerClient) Release(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, leaseID uint64) (limiter.Answer, bool, error) {
	if hops < 0 || hops > maxPeerHops {
		return limiter.Answer{}, false, fmt.Errorf("transport: PeerClient.Release: hops %d out of [0, %d]", hops, maxPeerHops)
	}
	p, err := c.peerFor(to)
	if err != nil {
		return limiter.Answer{}, false, err
	}
	tk, ok := p.br.allow()
	if !ok {
		return limiter.Answer{}, false, p.circuitErr
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var it sluicev1.PeerItem
	var lim sluicev1.PeerLimit
	req := &sluicev1.PeerReleaseRequest{From: c.cfg.Self, Hops: uint32(hops), Item: toPeerItem(&it, &lim, &item), LeaseId: leaseID}
	c.m.rpc(peerRelease)
	resp, err := p.rpc.Release(rctx, req)
	p.br.record(tk, directOutcome(ctx, rctx, err))
	if err != nil {
		return limiter.Answer{}, false, p.callErr(ctx, peerRelease, err)
	}
	var a limiter.Answer
	fromPeerResult(&a, resp.GetResult())
	return a, resp.GetReleased(), nil
}

// Fetch moves the states of hashes from node from (their previous owner)
// to the caller. Concurrent fetches from the same node are coalesced like
// checks (adaptively, without BatchWindow). A state is returned to every
// concurrent caller that asked for its hash.
func (c *PeerClient) Fetch(ctx context.Context, from ring.Member, hashes []uint64) ([]store.Entry, error) {
	if len(hashes) == 0 {
		return nil, nil
	}
	p, err := c.peerFor(from)
	if err != nil {
		return nil, err
	}
	if p.br.rejects() {
		return nil, p.circuitErr
	}
	b := p.fetch
	calls := make([]*fetchCall, 0, (len(hashes)+fetchBatch-1)/fetchBatch)
	for off := 0; off < len(hashes); off += fetchBatch {
		pc := b.get()
		pc.In = hashes[off:min(off+fetchBatch, len(hashes))]
		calls = append(calls, pc)
	}
	var out []store.Entry
	err = b.do(ctx, calls, func(pc *fetchCall) {
		if out == nil {
			out = pc.Out
		} else {
			out = append(out, pc.Out...)
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sendFetch is the Fetch batcher's flush: one RPC for calls, unless the
// circuit is open.
func (p *peerConn) sendFetch(ctx context.Context, calls []*fetchCall, _ int) {
	callers := callersDeadline(ctx, calls)
	live, n, tk, ok := admitBatch(p, calls)
	if !ok {
		return
	}
	hashes := make([]uint64, 0, n)
	for _, pc := range live {
		hashes = append(hashes, pc.In...)
	}
	p.c.m.rpc(peerFetch)
	resp, err := p.rpc.Fetch(ctx, &sluicev1.FetchRequest{From: p.c.cfg.Self, Hashes: hashes}, grpc.MaxCallRecvMsgSize(fetchRecvBytes))
	p.br.record(tk, rpcOutcome(err, callers))
	if err != nil {
		p.c.m.rpcError(peerFetch)
		wire.FailAll(live, p.unavailable("Fetch", err))
		return
	}
	// The owner deleted what it sent: keep every state it could send, even
	// if one is malformed (that one is dropped; it cannot be imported).
	states := resp.GetStates()
	entries := make([]store.Entry, 0, len(states))
	for _, ks := range states {
		var e store.Entry
		if fromKeyState(&e, ks) == nil {
			entries = append(entries, e)
		}
	}
	if len(live) == 1 {
		if pc := live[0]; pc.Claim() {
			pc.Out = entries
			pc.Answer(nil)
		}
		return
	}
	given := make([]bool, len(entries))
	for _, pc := range live {
		if !pc.Claim() {
			continue
		}
		var out []store.Entry
		for i := range entries {
			if !slices.Contains(pc.In, entries[i].Key) {
				continue
			}
			e := entries[i]
			if given[i] { // also asked for by another caller: its own copy
				e.Log.Entries = slices.Clone(e.Log.Entries)
				e.Leases.Leases = slices.Clone(e.Leases.Leases)
			}
			given[i] = true
			out = append(out, e)
		}
		pc.Out = out
		pc.Answer(nil)
	}
}

// Handoff pushes states to node to, their new owner, in RPCs of at most
// about 1 MiB, and sends donePartitions with the last one, so the receiver
// learns a partition is complete only after all its states arrived. States
// the receiver refuses (its store is full) are counted in the metrics; they
// are not an error. Each RPC passes the peer's circuit breaker: an open
// circuit fails the Handoff before its next RPC.
func (c *PeerClient) Handoff(ctx context.Context, to ring.Member, entries []store.Entry, donePartitions []int) error {
	if len(entries) == 0 && len(donePartitions) == 0 {
		return nil
	}
	var done []int32
	if len(donePartitions) > 0 {
		done = make([]int32, len(donePartitions))
		for i, d := range donePartitions {
			if d < 0 || d > math.MaxInt32 {
				return fmt.Errorf("transport: PeerClient.Handoff: partition %d out of range", d)
			}
			done[i] = int32(d)
		}
	}
	p, err := c.peerFor(to)
	if err != nil {
		return err
	}
	for start := 0; ; {
		end, size := start, 0
		for end < len(entries) && end-start < handoffStates {
			s := keyStateSize(&entries[end])
			if end > start && size+s > handoffBytes {
				break
			}
			size += s
			end++
		}
		req := &sluicev1.HandoffRequest{From: c.cfg.Self}
		if end > start {
			states := make([]sluicev1.KeyState, end-start)
			req.States = make([]*sluicev1.KeyState, end-start)
			for i := range states {
				req.States[i] = toKeyState(&states[i], &entries[start+i])
			}
		}
		last := end == len(entries)
		if last {
			req.DonePartitions = done
		}
		tk, ok := p.br.allow()
		if !ok {
			return p.circuitErr
		}
		rctx, cancel := context.WithTimeout(ctx, handoffTimeouts*c.cfg.Timeout)
		c.m.rpc(peerHandoff)
		resp, err := p.rpc.Handoff(rctx, req)
		p.br.record(tk, directOutcome(ctx, rctx, err))
		cancel()
		if status.Code(err) == codes.FailedPrecondition {
			return fmt.Errorf("%w: %s: %w", limiter.ErrPeerUnavailable, p.name, limiter.ErrLeaving)
		}
		if err != nil {
			return p.callErr(ctx, peerHandoff, err)
		}
		c.m.refused(resp.GetRefused())
		if last {
			return nil
		}
		start = end
	}
}

// PeerMetrics are the peer client's Prometheus metrics, with atomic
// counters alongside for cheap reads (Snapshot). No per-key labels; the
// only per-peer label is the node name of the circuit gauge (bounded by the
// cluster size; a forgotten peer's series is removed).
type PeerMetrics struct {
	rpcs          [numPeerMethods]prometheus.Counter
	errs          [numPeerMethods]prometheus.Counter
	items         prometheus.Counter
	batch         prometheus.Histogram
	refusedC      prometheus.Counter
	served        *prometheus.HistogramVec // server side, by RegisterPeer
	circuitOpen   *prometheus.GaugeVec     // by peer name
	circuitOpened prometheus.Counter

	checkRPCs, forwardedItems atomic.Uint64
}

// PeerStats is a snapshot of PeerMetrics.
type PeerStats struct {
	// CheckRPCs is the number of Check RPCs sent.
	CheckRPCs uint64
	// ForwardedItems is the number of items sent in Check RPCs;
	// ForwardedItems/CheckRPCs is the mean batch size.
	ForwardedItems uint64
}

// NewPeerMetrics registers the peer client metrics on reg; a nil reg keeps
// them unregistered (they still work):
//
//	sluice_peer_rpcs_total{method}        RPCs sent, by method
//	sluice_peer_rpc_errors_total{method}  RPCs that failed, by method
//	sluice_peer_forwarded_items_total     items sent in Check RPCs
//	sluice_peer_batch_items               items per Check RPC (histogram)
//	sluice_peer_handoff_refused_total     states a new owner refused (full)
//	sluice_peer_served_duration_seconds{method}  latency of the peer calls
//	                                      this node serves, when passed to
//	                                      RegisterPeer
//	sluice_peer_circuit_open{peer}        1 while the circuit breaker of
//	                                      peer (a node name) is open or
//	                                      half-open, 0 while closed
//	sluice_peer_circuit_opened_total      times a closed circuit opened (a
//	                                      failed probe reopening it is not
//	                                      counted)
func NewPeerMetrics(reg prometheus.Registerer) (*PeerMetrics, error) {
	rpcs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_rpcs_total",
		Help: "RPCs sent to other nodes, by method.",
	}, []string{"method"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_rpc_errors_total",
		Help: "RPCs to other nodes that failed, by method.",
	}, []string{"method"})
	m := &PeerMetrics{
		items: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Name: "peer_forwarded_items_total",
			Help: "Items forwarded to their owners in Check RPCs.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Name: "peer_batch_items",
			Help:    "Items per forwarded Check RPC.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14), // 1 .. 8192
		}),
		refusedC: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Name: "peer_handoff_refused_total",
			Help: "Handed-off states the new owner refused because its store was full.",
		}),
		served: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Name: "peer_served_duration_seconds",
			Help:    "Latency of the peer calls this node serves, by method.",
			Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1},
		}, []string{"method"}),
		circuitOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "sluice", Name: "peer_circuit_open",
			Help: "1 while the circuit breaker of a peer is open (calls to it fail at once), 0 while closed.",
		}, []string{"peer"}),
		circuitOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Name: "peer_circuit_opened_total",
			Help: "Times the circuit breaker of a peer opened after consecutive failed RPCs.",
		}),
	}
	for i, method := range peerMethods {
		m.rpcs[i] = rpcs.WithLabelValues(method)
		m.errs[i] = errs.WithLabelValues(method)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{rpcs, errs, m.items, m.batch, m.refusedC, m.served, m.circuitOpen, m.circuitOpened} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Snapshot returns the current counts (zero for a nil m).
func (m *PeerMetrics) Snapshot() PeerStats {
	if m == nil {
		return PeerStats{}
	}
	return PeerStats{CheckRPCs: m.checkRPCs.Load(), ForwardedItems: m.forwardedItems.Load()}
}

func (m *PeerMetrics) peerServedObserver(method string) prometheus.Observer {
	if m == nil {
		return nopObserver{}
	}
	return m.served.WithLabelValues(method)
}

func (m *PeerMetrics) rpc(method int) {
	if m != nil {
		m.rpcs[method].Inc()
	}
}

func (m *PeerMetrics) rpcError(method int) {
	if m != nil {
		m.errs[method].Inc()
	}
}

func (m *PeerMetrics) checkRPC(items int) {
	if m == nil {
		return
	}
	m.rpcs[peerCheck].Inc()
	m.items.Add(float64(items))
	m.batch.Observe(float64(items))
	m.checkRPCs.Add(1)
	m.forwardedItems.Add(uint64(items))
}

// forgetPeer removes the circuit gauge of the peer named name.
func (m *PeerMetrics) forgetPeer(name string) {
	if m != nil {
		m.circuitOpen.DeleteLabelValues(name)
	}
}

func (m *PeerMetrics) refused(n int32) {
	if m != nil && n > 0 {
		m.refusedC.Add(float64(n))
	}
}
