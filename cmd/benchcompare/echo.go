package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/bench"
	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// echoServer answers Check with a response of the same size as Sluice's,
// without deciding anything: the cost of gRPC and protobuf alone (as in
// node/bench_test.go).
type echoServer struct {
	sluicev1.UnimplementedRateLimiterServer
}

func (echoServer) Check(_ context.Context, req *sluicev1.CheckRequest) (*sluicev1.CheckResponse, error) {
	resp := &sluicev1.CheckResponse{Results: make([]*sluicev1.CheckResult, len(req.Items))}
	for i := range req.Items {
		resp.Results[i] = &sluicev1.CheckResult{Allowed: true, Limit: 1_000_000, Remaining: 999_999,
			ResetAfter: durationpb.New(time.Millisecond), RetryAfter: durationpb.New(0),
			Source: sluicev1.Source_SOURCE_OWNER, Owner: "n1"}
	}
	return resp, nil
}

// rlsEchoServer answers ShouldRateLimit OK for every descriptor, with a
// current limit, without deciding or counting anything: the floor of one
// Envoy RLS call.
type rlsEchoServer struct {
	rlspb.UnimplementedRateLimitServiceServer
}

func (rlsEchoServer) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK, Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(req.Descriptors))}
	for i := range req.Descriptors {
		resp.Statuses[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK,
			CurrentLimit:   &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: limitN, Unit: rlspb.RateLimitResponse_RateLimit_SECOND},
			LimitRemaining: limitN - 1, DurationUntilReset: durationpb.New(time.Second)}
	}
	return resp, nil
}

// runEchoServer is the `echo-server` subcommand: it serves until SIGTERM or
// SIGINT.
func runEchoServer(args []string) error {
	fs := flag.NewFlagSet("echo-server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "gRPC listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	s := grpc.NewServer(wire.ServerOptions()...) // as Sluice's servers
	sluicev1.RegisterRateLimiterServer(s, echoServer{})
	rlspb.RegisterRateLimitServiceServer(s, rlsEchoServer{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		s.Stop()
	}()
	fmt.Fprintln(os.Stderr, "echo-server: listening on", ln.Addr())
	return s.Serve(ln)
}

// echoTarget sends one unary Check per call, all keys as items, with the
// same limit as the others get; every answer is "allowed".
type echoTarget struct {
	conn  *grpc.ClientConn
	api   sluicev1.RateLimiterClient
	limit *sluicev1.Limit
}

var _ bench.Target = (*echoTarget)(nil)

func newEchoTarget(addr string, limit, burst int64, period time.Duration) (*echoTarget, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), wire.DialOption())
	if err != nil {
		return nil, err
	}
	return &echoTarget{conn: conn, api: sluicev1.NewRateLimiterClient(conn),
		limit: &sluicev1.Limit{Limit: limit, Burst: burst, Period: durationpb.New(period)}}, nil
}

func (t *echoTarget) Check(ctx context.Context, keys []string, allowed []bool) error {
	req := &sluicev1.CheckRequest{Items: make([]*sluicev1.CheckItem, len(keys))}
	cost := int64(1)
	for i, k := range keys {
		req.Items[i] = &sluicev1.CheckItem{Key: k, Cost: &cost, Spec: &sluicev1.CheckItem_Limit{Limit: t.limit}}
	}
	resp, err := t.api.Check(ctx, req)
	if err != nil {
		return err
	}
	if len(resp.Results) != len(keys) {
		return fmt.Errorf("echo: %d results for %d items", len(resp.Results), len(keys))
	}
	for i, r := range resp.Results {
		allowed[i] = r.Allowed
	}
	return nil
}

func (t *echoTarget) Close() error { return t.conn.Close() }
