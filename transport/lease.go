package transport

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Acquire takes a lease on node to.
func (c *PeerClient) Acquire(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error) {
	var none store.LeaseID
	if hops < 0 || hops > maxPeerHops {
		return limiter.Answer{}, none, fmt.Errorf("transport: PeerClient.Acquire: hops %d out of [0, %d]", hops, maxPeerHops)
	}
	p, err := c.peerFor(to)
	if err != nil {
		return limiter.Answer{}, none, err
	}
	tk, ok := p.br.allow()
	if !ok {
		return limiter.Answer{}, none, p.circuitErr
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var it sluicev1.PeerItem
	var lim sluicev1.PeerLimit
	req := &sluicev1.PeerAcquireRequest{From: c.cfg.Self, Hops: uint32(hops), Epoch: c.epoch(), Item: toPeerItem(&it, &lim, &item), TtlNs: int64(ttl), Holder: item.Holder}
	c.m.rpc(peerAcquire)
	resp, err := p.rpc.Acquire(rctx, req)
	p.br.record(tk, directOutcome(ctx, rctx, err))
	if err != nil {
		return limiter.Answer{}, none, p.callErr(ctx, peerAcquire, err)
	}
	var a limiter.Answer
	fromPeerResult(&a, resp.GetResult())
	return a, store.LeaseID{ID: resp.GetLeaseId(), Tag: resp.GetLeaseTag()}, nil
}

// Release returns a lease on node to.
func (c *PeerClient) Release(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, leaseID store.LeaseID) (limiter.Answer, bool, error) {
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
	req := &sluicev1.PeerReleaseRequest{From: c.cfg.Self, Hops: uint32(hops), Epoch: c.epoch(), Item: toPeerItem(&it, &lim, &item), LeaseId: leaseID.ID, LeaseTag: leaseID.Tag, Holder: item.Holder}
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
