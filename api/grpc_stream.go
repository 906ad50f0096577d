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

// CheckStream answers batches of checks on one long-lived stream (see
// serveBatches).
func (s *rateLimiterServer) CheckStream(stream sluicev1.RateLimiter_CheckStreamServer) error {
	ctx := stream.Context()
	client := grpcHolder(ctx) // new keys count against its cap
	recv := func() (*sluicev1.CheckStreamRequest, error) {
		req := sluicev1.CheckStreamRequestFromVTPool()
		if err := stream.RecvMsg(req); err != nil {
			req.ReturnToVTPool()
			return nil, err
		}
		return req, nil
	}
	handle := func(req *sluicev1.CheckStreamRequest) *sluicev1.CheckStreamResponse {
		defer since(s.obsStream, time.Now())
		resp := s.checkBatch(ctx, client, req)
		req.ReturnToVTPool()
		return resp
	}
	fail := func(req *sluicev1.CheckStreamRequest, err error) *sluicev1.CheckStreamResponse {
		st := status.Convert(err)
		resp := &sluicev1.CheckStreamResponse{Id: req.GetId(), Results: make([]*sluicev1.CheckResult, len(req.GetItems()))}
		for i := range resp.Results {
			resp.Results[i] = &sluicev1.CheckResult{Error: &sluicev1.ItemError{Code: int32(st.Code()), Message: st.Message()}}
		}
		return resp
	}
	return wire.ServeBatches(recv, stream.Send, wire.Batches[*sluicev1.CheckStreamRequest, *sluicev1.CheckStreamResponse]{
		Drain: s.drain, DrainMsg: &sluicev1.CheckStreamResponse{Drain: true},
		Handle: handle, Fail: fail, Method: sluicev1.RateLimiter_CheckStream_FullMethodName, Recovery: s.recovery,
		Gate: s.gate(ctx),
	})
}

// gate is the admission of the messages of the stream of ctx; nil without
// limits.
func (s *rateLimiterServer) gate(ctx context.Context) *wire.Gate {
	if s.limits == nil {
		return nil
	}
	return s.limits.Gate(ctx)
}

// checkBatch decides one stream message. Items are independent: one that
// fails validation gets an INVALID_ARGUMENT result naming its field, and
// the rest are decided without it.
// client is the stream's verified client identity ("" for none).
func (s *rateLimiterServer) checkBatch(ctx context.Context, client string, req *sluicev1.CheckStreamRequest) *sluicev1.CheckStreamResponse {
	items := req.GetItems()
	resp := &sluicev1.CheckStreamResponse{Id: req.GetId(), Results: make([]*sluicev1.CheckResult, len(items))}
	out := make([]sluicev1.CheckResult, len(items))
	durs := make([]durationpb.Duration, 2*len(items))
	for i := range out {
		resp.Results[i] = &out[i]
	}
	if len(items) > limiter.MaxItems {
		for i := range out {
			out[i].Error = &sluicev1.ItemError{Code: int32(codes.InvalidArgument), Field: "items",
				Message: fmt.Sprintf("%d items in one message, at most %d", len(items), limiter.MaxItems)}
		}
		return resp
	}
	sc, _ := s.scratch.Get().(*checkScratch)
	if sc == nil {
		sc = new(checkScratch)
	}
	defer func() {
		clear(sc.reqs[:cap(sc.reqs)])
		clear(sc.res[:cap(sc.res)])
		clear(sc.idx[:cap(sc.idx)])
		s.scratch.Put(sc)
	}()
	reqs := sc.get(len(items))[:0]
	idx := sc.idx[:0] // idx[j] is the item of reqs[j]
	for i, it := range items {
		var r limiter.Request
		if err := fromProtoItem(&r, it.GetKey(), it.GetLimit(), it.GetPolicy(), it.Cost); err != nil {
			out[i].Error = &sluicev1.ItemError{Code: int32(codes.InvalidArgument), Field: err.Field, Message: err.Reason}
			continue
		}
		r.UpTo, r.Client = it.GetUpTo(), client
		reqs = append(reqs, r)
		idx = append(idx, i)
	}
	for len(reqs) > 0 {
		results, err := s.svc.Check(ctx, reqs, sc.res[:0])
		var fe *limiter.FieldError
		switch {
		case err == nil:
			for j := range results {
				fillResult(&out[idx[j]], durs[2*idx[j]:], &results[j])
			}
			reqs = reqs[:0]
		case errors.As(err, &fe) && fe.Index >= 0 && fe.Index < len(reqs):
			// Drop the invalid item and decide the others.
			field := fe.Field
			if p, ok := protoFields[field]; ok {
				field = p
			}
			out[idx[fe.Index]].Error = &sluicev1.ItemError{Code: int32(codes.InvalidArgument), Field: field, Message: fe.Reason}
			reqs = append(reqs[:fe.Index], reqs[fe.Index+1:]...)
			idx = append(idx[:fe.Index], idx[fe.Index+1:]...)
		default:
			code := status.Code(grpcError("items", err))
			for _, i := range idx {
				out[i].Error = &sluicev1.ItemError{Code: int32(code), Message: err.Error()}
			}
			reqs = reqs[:0]
		}
	}
	sc.idx = idx
	return resp
}

// fillResult writes r into o, with its two durations in durs[0:2].
func fillResult(o *sluicev1.CheckResult, durs []durationpb.Duration, r *limiter.Result) {
	o.Allowed = r.Allowed
	o.Limit = r.Limit
	o.Remaining = r.Remaining
	o.ResetAfter = setDuration(&durs[0], r.ResetAfter)
	o.RetryAfter = setDuration(&durs[1], r.RetryAfter)
	o.Source = toProtoSource(r.Source)
	o.Owner = r.Owner
	o.Granted, o.GrantId, o.Issuer = r.Granted.Tokens, r.Granted.ID, r.Granted.Issuer
	if r.Err != nil {
		o.Error = &sluicev1.ItemError{Code: int32(wire.ItemCode(r.Err)), Message: r.Err.Error()}
	}
}
