package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
)

// CheckAtomic decides items all or nothing on node to (Peer.CheckAtomic),
// one unary call.
func (c *PeerClient) CheckAtomic(ctx context.Context, to ring.Member, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	if hops < 0 || hops > maxPeerHops {
		return fmt.Errorf("transport: PeerClient.CheckAtomic: hops %d out of [0, %d]", hops, maxPeerHops)
	}
	p, err := c.peerFor(to)
	if err != nil {
		return err
	}
	tk, ok := p.br.allow()
	if !ok {
		return p.circuitErr
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req := &sluicev1.PeerCheckRequest{From: c.cfg.Self, Hops: uint32(hops), Epoch: c.epoch(), Items: make([]*sluicev1.PeerItem, len(items)),
		TimeoutNs: int64(c.cfg.Timeout)}
	for i := range items {
		req.Items[i] = toPeerItem(&sluicev1.PeerItem{}, &sluicev1.PeerLimit{}, &items[i])
	}
	c.m.rpc(peerCheckAtomic)
	resp, err := p.rpc.CheckAtomic(rctx, req)
	p.br.record(tk, directOutcome(ctx, rctx, err))
	if err != nil {
		if st, ok := status.FromError(err); ok && st.Code() == codes.FailedPrecondition {
			return fmt.Errorf("%w: %s: %s", limiter.ErrAtomicElsewhere, to.Name, st.Message())
		}
		return p.callErr(ctx, peerCheckAtomic, err)
	}
	if len(resp.GetResults()) != len(items) {
		return fmt.Errorf("%w: %s answered %d results for %d items", limiter.ErrPeerUnavailable, to.Name, len(resp.GetResults()), len(items))
	}
	for i, r := range resp.GetResults() {
		fromPeerResult(&out[i], r)
	}
	return nil
}

func (s *peerServer) CheckAtomic(ctx context.Context, req *sluicev1.PeerCheckRequest) (*sluicev1.PeerCheckResponse, error) {
	defer s.observe(peerCheckAtomic, time.Now())
	hops, err := peerHops(req.GetHops())
	if err != nil {
		return nil, err
	}
	items := req.GetItems()
	if len(items) > MaxPeerBatch {
		return nil, wire.InvalidArgument("items", fmt.Sprintf("%d items, at most %d per call", len(items), MaxPeerBatch))
	}
	ctx, cancel, err := callDeadline(ctx, req.GetTimeoutNs())
	if err != nil {
		return nil, err
	}
	defer cancel()
	fw := make([]limiter.Forwarded, len(items))
	for i, it := range items {
		if fe := fromPeerItem(&fw[i], it, &s.zones); fe != nil {
			return nil, wire.InvalidArgument(peerFieldPath(fmt.Sprintf("items[%d]", i), fe.Field), fe.Reason)
		}
	}
	ans := make([]limiter.Answer, len(items))
	if err := s.svc.CheckAtomicForwarded(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hops, fw, ans); err != nil {
		switch {
		case errors.Is(err, limiter.ErrNotMember), errors.Is(err, limiter.ErrEpochAhead), errors.Is(err, limiter.ErrEpochBehind):
			return nil, peerStatus(err)
		case errors.Is(err, limiter.ErrAtomicElsewhere):
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		return nil, status.Error(answerCode(err), err.Error())
	}
	resp := &sluicev1.PeerCheckResponse{Owner: s.name, Results: make([]*sluicev1.PeerResult, len(ans))}
	for i := range ans {
		resp.Results[i] = toPeerResult(&sluicev1.PeerResult{}, &ans[i])
	}
	return resp, nil
}
