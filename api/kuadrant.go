package api

// Kuadrant's rate limit service, kuadrant.service.ratelimit.v1.RateLimitService
// (Kuadrant/limitador's limitador-server/proto/kuadrantrls.proto), beside
// Envoy's RLS, so that a Kuadrant user (its wasm-shim) can point at Sluice.
// Its messages are Envoy's RateLimitRequest and RateLimitResponse, so the
// service is described here by hand on go-control-plane's types, with no
// generated code:
//
//	CheckRateLimit  ShouldRateLimit, the same answer.
//	Report          adds each descriptor's hits (hits_addend, as
//	                ShouldRateLimit counts them) to its counters after the
//	                fact, e.g. an LLM response's tokens; the answer is OK,
//	                with no statuses: a report is not a decision.
//
// Limitador's Reserve and Commit are not served (UNIMPLEMENTED); Sluice's
// own Reserve and Settle (sluice.v1) are their counterpart.

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// KuadrantServiceName is the gRPC name of Kuadrant's rate limit service.
const KuadrantServiceName = "kuadrant.service.ratelimit.v1.RateLimitService"

// kuadrantServer is Kuadrant's service: the handler type of its ServiceDesc.
type kuadrantServer interface {
	CheckRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
	Report(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)
}

// kuadrant serves Kuadrant's service over an RLS.
type kuadrant struct{ s *RLS }

// CheckRateLimit is ShouldRateLimit.
func (k kuadrant) CheckRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return k.s.ShouldRateLimit(ctx, req)
}

// Report counts the request's hits as ShouldRateLimit does (its counters
// are fixed_window_hits: every hit counts, admitted or not) and answers
// OK. Bad input is refused as ShouldRateLimit refuses it, before anything
// is counted.
func (k kuadrant) Report(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if _, err := k.s.ShouldRateLimit(ctx, req); err != nil {
		return nil, err
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}, nil
}

// kuadrantMethod is the unary handler of one of the service's methods.
func kuadrantMethod(name string, call func(kuadrantServer, context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)) grpc.MethodDesc {
	full := "/" + KuadrantServiceName + "/" + name
	return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(rlsv3.RateLimitRequest)
		if err := dec(in); err != nil {
			return nil, err
		}
		if interceptor == nil {
			return call(srv.(kuadrantServer), ctx, in)
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: full}
		return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
			return call(srv.(kuadrantServer), ctx, req.(*rlsv3.RateLimitRequest))
		})
	}}
}

// kuadrantServiceDesc describes Kuadrant's service for grpc.Server.
var kuadrantServiceDesc = grpc.ServiceDesc{
	ServiceName: KuadrantServiceName,
	HandlerType: (*kuadrantServer)(nil),
	Methods: []grpc.MethodDesc{
		kuadrantMethod("CheckRateLimit", kuadrantServer.CheckRateLimit),
		kuadrantMethod("Report", kuadrantServer.Report),
	},
	Metadata: "kuadrantrls.proto",
}
