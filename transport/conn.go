package transport

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

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
	p.circuitErr = fmt.Errorf("%w: %w: %w: %s", limiter.ErrPeerUnavailable, limiter.ErrNotSent, ErrCircuitOpen, m.Name)
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
//
// A PermissionDenied answer (the peer's ring does not have this node, see
// limiter.ErrNotMember) wraps limiter.ErrNotMember too; an ABORTED one
// for the call's epoch (epochOf) is the limiter.EpochError, which wraps
// limiter.ErrPeerUnavailable and limiter.ErrNotSent.
func (p *peerConn) unavailable(method string, err error) error {
	if ee := epochOf(err); ee != nil {
		return fmt.Errorf("%s %s (%s): %w", method, p.name, p.addr, ee)
	}
	if status.Code(err) == codes.PermissionDenied {
		return fmt.Errorf("%w: %s %s (%s): %w: %w", limiter.ErrPeerUnavailable, method, p.name, p.addr, limiter.ErrNotMember, err)
	}
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
