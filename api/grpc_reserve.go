package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Reserver is what Reserve and Settle need from the limiter
// (*limiter.Limiter satisfies it). A Service without it answers them
// UNIMPLEMENTED.
type Reserver interface {
	ReserveAll(ctx context.Context, reqs []limiter.ReserveRequest) ([]limiter.Reservation, bool, error)
	SettleAll(ctx context.Context, reqs []limiter.SettleRequest) ([]limiter.Settlement, error)
}

// reserveError maps an error of ReserveAll or SettleAll to a gRPC status:
// an unknown reservation is NOT_FOUND naming the item's reservation_id,
// the rest as grpcError.
func reserveError(err error) error {
	var fe *limiter.FieldError
	if errors.Is(err, limiter.ErrUnknownReservation) && errors.As(err, &fe) {
		return status.Error(codes.NotFound, fmt.Sprintf("items[%d].reservation_id: %s", fe.Index, fe.Reason))
	}
	return grpcError("items", err)
}

func (s *rateLimiterServer) Reserve(ctx context.Context, req *sluicev1.ReserveRequest) (*sluicev1.ReserveResponse, error) {
	rs, ok := s.svc.(Reserver)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "Reserve is not served here")
	}
	items := req.GetItems()
	if len(items) == 0 || len(items) > limiter.MaxItems {
		return nil, wire.InvalidArgument("items", fmt.Sprintf("%d items, want 1 to %d", len(items), limiter.MaxItems))
	}
	var ttl int64
	if req.Ttl != nil {
		if err := req.Ttl.CheckValid(); err != nil {
			return nil, wire.InvalidArgument("ttl", err.Error())
		}
		ttl = int64(req.Ttl.AsDuration())
	}
	holder := grpcHolder(ctx)
	reqs := make([]limiter.ReserveRequest, len(items))
	for i, it := range items {
		if err := fromProtoItem(&reqs[i].Request, it.GetKey(), it.GetLimit(), it.GetPolicy(), nil); err != nil {
			return nil, wire.InvalidArgument(fmt.Sprintf("items[%d].%s", i, err.Field), err.Reason)
		}
		reqs[i].Estimate, reqs[i].Holder, reqs[i].Client = it.GetEstimate(), holder, holder
		reqs[i].TTL = time.Duration(ttl)
	}
	out, all, err := rs.ReserveAll(ctx, reqs)
	if err != nil {
		if fe := (*limiter.FieldError)(nil); errors.As(err, &fe) && fe.Field == "ttl" {
			return nil, wire.InvalidArgument("ttl", fe.Reason)
		}
		return nil, reserveError(err)
	}
	resp := &sluicev1.ReserveResponse{Allowed: all, Results: make([]*sluicev1.ReserveResult, len(items))}
	for i := range resp.Results {
		o := &sluicev1.ReserveResult{}
		if i < len(out) {
			r := &out[i]
			o.Allowed, o.ReservationId, o.Limit, o.Remaining = r.Allowed, r.ID, r.Limit, r.Remaining
			o.ResetAfter, o.RetryAfter = durationpb.New(r.ResetAfter), durationpb.New(r.RetryAfter)
			o.ExpiresAfter, o.Source, o.Owner = durationpb.New(r.ExpiresAfter), toProtoSource(r.Source), r.Owner
			if r.Err != nil {
				o.Error = &sluicev1.ItemError{Code: int32(itemCode(r.Err)), Message: r.Err.Error()}
			}
		}
		resp.Results[i] = o
	}
	return resp, nil
}

func (s *rateLimiterServer) Settle(ctx context.Context, req *sluicev1.SettleRequest) (*sluicev1.SettleResponse, error) {
	rs, ok := s.svc.(Reserver)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "Settle is not served here")
	}
	items := req.GetItems()
	if len(items) == 0 || len(items) > limiter.MaxItems {
		return nil, wire.InvalidArgument("items", fmt.Sprintf("%d items, want 1 to %d", len(items), limiter.MaxItems))
	}
	holder := grpcHolder(ctx)
	reqs := make([]limiter.SettleRequest, len(items))
	for i, it := range items {
		if err := fromProtoItem(&reqs[i].Request, it.GetKey(), it.GetLimit(), it.GetPolicy(), nil); err != nil {
			return nil, wire.InvalidArgument(fmt.Sprintf("items[%d].%s", i, err.Field), err.Reason)
		}
		if it.GetReservationId() == "" {
			return nil, wire.InvalidArgument(fmt.Sprintf("items[%d].reservation_id", i), "is required")
		}
		reqs[i].ID, reqs[i].Actual, reqs[i].Holder = it.GetReservationId(), it.GetActual(), holder
	}
	out, err := rs.SettleAll(ctx, reqs)
	if err != nil {
		return nil, reserveError(err)
	}
	resp := &sluicev1.SettleResponse{Results: make([]*sluicev1.SettleResult, len(out))}
	for i := range out {
		st := &out[i]
		if st.Err != nil {
			return nil, status.Error(itemCode(st.Err), fmt.Sprintf("items[%d]: %v", i, st.Err))
		}
		resp.Results[i] = &sluicev1.SettleResult{
			AlreadySettled: st.Already, Estimate: st.Estimate, Actual: st.Actual,
			Refunded: st.Refunded, Charged: st.Charged, Forgiven: st.Forgiven,
			Limit: st.Limit, Remaining: st.Remaining, ResetAfter: durationpb.New(st.ResetAfter), Owner: st.Owner,
		}
	}
	return resp, nil
}
