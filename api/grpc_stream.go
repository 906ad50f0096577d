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
	recv := func() (*streamRequest, error) {
		req := s.request()
		if err := stream.RecvMsg(req); err != nil {
			s.releaseRequest(req)
			return nil, err
		}
		return req, nil
	}
	handle := func(req *streamRequest) *streamAnswer {
		defer since(s.obsStream, time.Now())
		resp := s.checkBatch(ctx, client, &req.CheckStreamRequest)
		s.releaseRequest(req)
		return resp
	}
	// gRPC encodes a message before Send returns: the answer's memory is
	// reused from then on.
	send := func(a *streamAnswer) error {
		err := stream.Send(&a.msg)
		s.release(a)
		return err
	}
	fail := func(req *streamRequest, err error) *streamAnswer {
		st := status.Convert(err)
		a := s.answer(req.GetId(), len(req.GetItems()))
		for i := range a.out {
			a.out[i].Error = &sluicev1.ItemError{Code: int32(st.Code()), Message: st.Message()}
		}
		return a
	}
	return wire.ServeBatches(recv, send, wire.Batches[*streamRequest, *streamAnswer]{
		Drain: s.drain, DrainMsg: &streamAnswer{msg: sluicev1.CheckStreamResponse{Drain: true}},
		Handle: handle, Fail: fail, Method: sluicev1.RateLimiter_CheckStream_FullMethodName, Recovery: s.recovery,
		Gate: s.gate(ctx),
	})
}

// streamAnswer is one CheckStream answer with the memory of its results,
// pooled per server (answer, release), so that a message of a few items
// allocates nothing for its answer.
type streamAnswer struct {
	msg     sluicev1.CheckStreamResponse
	results []*sluicev1.CheckResult // msg.Results: pointers into out
	out     []sluicev1.CheckResult
	durs    []durationpb.Duration // two per result
	pooled  bool                  // from answer; the drain message is not
}

// maxPooledAnswer is the most results of an answer kept in the pool.
const maxPooledAnswer = 64

// answer returns an empty answer to message id, of n results.
func (s *rateLimiterServer) answer(id uint64, n int) *streamAnswer {
	a, _ := s.answers.Get().(*streamAnswer)
	if a == nil || cap(a.out) < n {
		a = &streamAnswer{pooled: true, results: make([]*sluicev1.CheckResult, n),
			out: make([]sluicev1.CheckResult, n), durs: make([]durationpb.Duration, 2*n)}
	}
	a.results, a.out, a.durs = a.results[:n], a.out[:n], a.durs[:2*n]
	for i := range a.out {
		a.results[i] = &a.out[i]
	}
	a.msg.Id, a.msg.Results = id, a.results
	return a
}

// release returns a sent answer to the pool.
func (s *rateLimiterServer) release(a *streamAnswer) {
	if !a.pooled || cap(a.out) > maxPooledAnswer {
		return
	}
	clear(a.results)
	clear(a.out) // pin no errors or owners
	clear(a.durs)
	a.msg.Id, a.msg.Results = 0, nil
	s.answers.Put(a)
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
func (s *rateLimiterServer) checkBatch(ctx context.Context, client string, req *sluicev1.CheckStreamRequest) *streamAnswer {
	items := req.GetItems()
	resp := s.answer(req.GetId(), len(items))
	out, durs := resp.out, resp.durs
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
		if err == nil {
			for j := range results {
				fillResult(&out[idx[j]], durs[2*idx[j]:], &results[j])
			}
			break
		}
		// (Declared here, not above: errors.As moves fe to the heap.)
		var fe *limiter.FieldError
		switch {
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
		o.Error = &sluicev1.ItemError{Code: int32(itemCode(r.Err)), Message: r.Err.Error()}
	}
}
