package transport

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
)

// Admin inspects or resets a key on node to, its owner (Peer.Admin).
func (c *PeerClient) Admin(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, op limiter.AdminOp) (limiter.KeyInfo, error) {
	if hops < 0 || hops > maxPeerHops {
		return limiter.KeyInfo{}, fmt.Errorf("transport: PeerClient.Admin: hops %d out of [0, %d]", hops, maxPeerHops)
	}
	p, err := c.peerFor(to)
	if err != nil {
		return limiter.KeyInfo{}, err
	}
	tk, ok := p.br.allow()
	if !ok {
		return limiter.KeyInfo{}, p.circuitErr
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var it sluicev1.PeerItem
	var lim sluicev1.PeerLimit
	req := &sluicev1.PeerAdminRequest{From: c.cfg.Self, Hops: uint32(hops), Epoch: c.epoch(), Item: toPeerItem(&it, &lim, &item), ResetState: op.Reset, Remaining: op.Remaining}
	c.m.rpc(peerAdmin)
	resp, err := p.rpc.Admin(rctx, req)
	p.br.record(tk, directOutcome(ctx, rctx, err))
	if err != nil {
		return limiter.KeyInfo{Owner: to.Name}, p.callErr(ctx, peerAdmin, err)
	}
	if code := codes.Code(resp.GetErrorCode()); code != codes.OK {
		return limiter.KeyInfo{Owner: to.Name}, answerError(code, resp.GetErrorMessage())
	}
	return fromKeyInfo(resp.GetInfo()), nil
}

func (s *peerServer) Admin(ctx context.Context, req *sluicev1.PeerAdminRequest) (*sluicev1.PeerAdminResponse, error) {
	defer s.observe(peerAdmin, time.Now())
	hops, f, err := singleItem(req.GetHops(), req.GetItem(), &s.zones)
	if err != nil {
		return nil, err
	}
	op := limiter.AdminOp{Reset: req.GetResetState(), Remaining: req.GetRemaining()}
	if op.Reset && op.Remaining < limiter.ResetFull {
		return nil, wire.InvalidArgument("remaining", fmt.Sprintf("%d: must be >= 0, or -1 for full", op.Remaining))
	}
	info, err := s.svc.AdminForwarded(limiter.WithSenderEpoch(ctx, req.GetEpoch()), req.GetFrom(), hops, f, op)
	if err != nil {
		if errors.Is(err, limiter.ErrNotMember) || errors.Is(err, limiter.ErrEpochAhead) || errors.Is(err, limiter.ErrEpochBehind) {
			return nil, peerStatus(err)
		}
		return &sluicev1.PeerAdminResponse{ErrorCode: int32(answerCode(err)), ErrorMessage: err.Error()}, nil
	}
	return &sluicev1.PeerAdminResponse{Info: toKeyInfo(&info)}, nil
}

// toKeyInfo converts a KeyInfo for the wire. The owner's clock travels as
// reset_at less reset_after.
func toKeyInfo(k *limiter.KeyInfo) *sluicev1.KeyInfo {
	out := &sluicev1.KeyInfo{
		Owner:            k.Owner,
		Algorithm:        wire.ToProtoAlgorithm(k.Algorithm),
		Policy:           k.Policy,
		Limit:            k.Limit,
		Remaining:        k.Remaining,
		ResetAfter:       durationpb.New(k.ResetAfter),
		ResetAt:          timestamppb.New(time.Unix(0, k.Now).Add(k.ResetAfter)),
		Exists:           k.Exists,
		Grants:           int32(min(k.Grants, 1<<31-1)),
		GrantedTokens:    k.GrantedTokens,
		LeaseCount:       int32(min(k.LeaseCount, 1<<31-1)),
		ReservationCount: int32(min(k.Reservations, 1<<31-1)),
		ReservedUnits:    k.ReservedUnits,
		DebtUnits:        k.DebtUnits,
	}
	if k.WindowStart != 0 {
		out.WindowStart = timestamppb.New(time.Unix(0, k.WindowStart))
	}
	for _, le := range k.Leases {
		out.Leases = append(out.Leases, &sluicev1.LeaseInfo{Cost: le.Cost, ExpiresAfter: durationpb.New(le.ExpiresAfter), Bound: le.Bound})
	}
	return out
}

// fromKeyInfo converts a KeyInfo from the wire (nil: the zero KeyInfo).
func fromKeyInfo(k *sluicev1.KeyInfo) limiter.KeyInfo {
	out := limiter.KeyInfo{
		Owner:         k.GetOwner(),
		Policy:        k.GetPolicy(),
		Exists:        k.GetExists(),
		Grants:        int(k.GetGrants()),
		GrantedTokens: k.GetGrantedTokens(),
		LeaseCount:    int(k.GetLeaseCount()),
		Reservations:  int(k.GetReservationCount()),
		ReservedUnits: k.GetReservedUnits(),
		DebtUnits:     k.GetDebtUnits(),
	}
	out.Algorithm, _ = wire.FromProtoAlgorithm(k.GetAlgorithm())
	out.Limit, out.Remaining = k.GetLimit(), k.GetRemaining()
	out.ResetAfter = k.GetResetAfter().AsDuration()
	if k.GetResetAt() != nil {
		out.Now = k.GetResetAt().AsTime().Add(-out.ResetAfter).UnixNano()
	}
	if k.GetWindowStart() != nil {
		out.WindowStart = k.GetWindowStart().AsTime().UnixNano()
	}
	for _, le := range k.GetLeases() {
		out.Leases = append(out.Leases, limiter.LeaseInfo{Cost: le.GetCost(), ExpiresAfter: le.GetExpiresAfter().AsDuration(), Bound: le.GetBound()})
	}
	return out
}
