package transport

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Reserve makes a reservation on node to.
func (c *PeerClient) Reserve(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error) {
	var none store.LeaseID
	if hops < 0 || hops > maxPeerHops {
		return limiter.Answer{}, none, fmt.Errorf("transport: PeerClient.Reserve: hops %d out of [0, %d]", hops, maxPeerHops)
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
	req := &sluicev1.PeerReserveRequest{From: c.cfg.Self, Hops: uint32(hops), Epoch: c.epoch(), Item: toPeerItem(&it, &lim, &item), TtlNs: int64(ttl), Holder: item.Holder}
	c.m.rpc(peerReserve)
	resp, err := p.rpc.Reserve(rctx, req)
	p.br.record(tk, directOutcome(ctx, rctx, err))
	if err != nil {
		return limiter.Answer{}, none, p.callErr(ctx, peerReserve, err)
	}
	var a limiter.Answer
	fromPeerResult(&a, resp.GetResult())
	return a, store.LeaseID{ID: resp.GetId(), Tag: resp.GetTag(), Holder: item.Holder}, nil
}

// Settle settles a reservation on node to.
func (c *PeerClient) Settle(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, id store.LeaseID) (limiter.Answer, limiter.SettleAnswer, error) {
	if hops < 0 || hops > maxPeerHops {
		return limiter.Answer{}, limiter.SettleAnswer{}, fmt.Errorf("transport: PeerClient.Settle: hops %d out of [0, %d]", hops, maxPeerHops)
	}
	p, err := c.peerFor(to)
	if err != nil {
		return limiter.Answer{}, limiter.SettleAnswer{}, err
	}
	tk, ok := p.br.allow()
	if !ok {
		return limiter.Answer{}, limiter.SettleAnswer{}, p.circuitErr
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var it sluicev1.PeerItem
	var lim sluicev1.PeerLimit
	req := &sluicev1.PeerSettleRequest{From: c.cfg.Self, Hops: uint32(hops), Epoch: c.epoch(), Item: toPeerItem(&it, &lim, &item), Id: id.ID, Tag: id.Tag, Holder: item.Holder}
	c.m.rpc(peerSettle)
	resp, err := p.rpc.Settle(rctx, req)
	p.br.record(tk, directOutcome(ctx, rctx, err))
	if err != nil {
		return limiter.Answer{}, limiter.SettleAnswer{}, p.callErr(ctx, peerSettle, err)
	}
	var a limiter.Answer
	fromPeerResult(&a, resp.GetResult())
	return a, limiter.SettleAnswer{
		Unknown: resp.GetUnknown(), Already: resp.GetAlready(),
		Estimate: resp.GetEstimate(), Actual: resp.GetActual(),
		Refunded: resp.GetRefunded(), Charged: resp.GetCharged(), Forgiven: resp.GetForgiven(),
	}, nil
}

func (s *peerServer) Reserve(ctx context.Context, req *sluicev1.PeerReserveRequest) (*sluicev1.PeerReserveResponse, error) {
	defer s.observe(peerReserve, time.Now())
	hops, f, err := singleItem(req.GetHops(), req.GetItem(), &s.zones)
	if err != nil {
		return nil, err
	}
	ttl := time.Duration(req.GetTtlNs())
	switch {
	case ttl <= 0:
		return nil, wire.InvalidArgument("ttl_ns", "must be > 0")
	case ttl > limiter.MaxLeaseTTL:
		return nil, wire.InvalidArgument("ttl_ns", fmt.Sprintf("must be <= %v", limiter.MaxLeaseTTL))
	case f.Cost <= 0:
		return nil, wire.InvalidArgument("item.cost", "must be > 0 (the estimate)")
	}
	f.Holder = req.GetHolder()
	ans, id, err := s.svc.ReserveForwarded(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hops, f, ttl)
	if err != nil {
		return nil, peerStatus(err)
	}
	return &sluicev1.PeerReserveResponse{Owner: s.name, Result: toPeerResult(&sluicev1.PeerResult{}, &ans), Id: id.ID, Tag: id.Tag}, nil
}

func (s *peerServer) Settle(ctx context.Context, req *sluicev1.PeerSettleRequest) (*sluicev1.PeerSettleResponse, error) {
	defer s.observe(peerSettle, time.Now())
	hops, f, err := singleItem(req.GetHops(), req.GetItem(), &s.zones)
	if err != nil {
		return nil, err
	}
	if f.Cost < 0 {
		return nil, wire.InvalidArgument("item.cost", "must be >= 0 (the actual cost)")
	}
	f.Holder = req.GetHolder()
	ans, sa, err := s.svc.SettleForwarded(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hops, f, store.LeaseID{ID: req.GetId(), Tag: req.GetTag()})
	if err != nil {
		return nil, peerStatus(err)
	}
	return &sluicev1.PeerSettleResponse{
		Owner: s.name, Result: toPeerResult(&sluicev1.PeerResult{}, &ans),
		Unknown: sa.Unknown, Already: sa.Already, Estimate: sa.Estimate, Actual: sa.Actual,
		Refunded: sa.Refunded, Charged: sa.Charged, Forgiven: sa.Forgiven,
	}, nil
}

// toPeerReservations converts a key's reservations for a KeyState (nil
// for none).
func toPeerReservations(rs []bucket.Reservation) []*sluicev1.PeerReservation {
	if len(rs) == 0 {
		return nil
	}
	out := make([]*sluicev1.PeerReservation, len(rs))
	for i, r := range rs {
		out[i] = &sluicev1.PeerReservation{
			Id: r.ID, Tag: r.Tag, Holder: r.Holder, Estimate: r.Estimate, Window: r.Window, Expires: r.Expires,
			Settled: r.Settled, Actual: r.Actual, Refunded: r.Refunded, Charged: r.Charged, Forgiven: r.Forgiven,
		}
	}
	return out
}

// fromPeerReservations sets dst's reservations from a KeyState's; their
// values are checked by store.Entry.Validate on import.
func fromPeerReservations(dst *store.Entry, rs []*sluicev1.PeerReservation) *wire.FieldError {
	if len(rs) > store.MaxReservations {
		return &wire.FieldError{Field: "reservations", Reason: fmt.Sprintf("%d reservations, at most %d", len(rs), store.MaxReservations)}
	}
	if len(rs) == 0 {
		return nil
	}
	dst.Reservations = make([]bucket.Reservation, len(rs))
	for i, r := range rs {
		if r == nil {
			return &wire.FieldError{Field: fmt.Sprintf("reservations[%d]", i), Reason: "must not be null"}
		}
		dst.Reservations[i] = bucket.Reservation{
			ID: r.GetId(), Tag: r.GetTag(), Holder: r.GetHolder(), Estimate: r.GetEstimate(), Window: r.GetWindow(), Expires: r.GetExpires(),
			Settled: r.GetSettled(), Actual: r.GetActual(), Refunded: r.GetRefunded(), Charged: r.GetCharged(), Forgiven: r.GetForgiven(),
		}
	}
	return nil
}
