package node_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// echoServer answers Check with a response of the same size as Sluice's,
// without deciding anything: the cost of gRPC and protobuf alone.
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

func startEcho(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer(wire.ServerOption())
	sluicev1.RegisterRateLimiterServer(s, echoServer{})
	go func() { _ = s.Serve(ln) }()
	b.Cleanup(s.Stop)
	return ln.Addr().String()
}

// benchCheck drives Check calls of `items` items each from many goroutines
// and reports checks/s.
func benchCheck(b *testing.B, addr string, items int) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		wire.DialOption())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	api := sluicev1.NewRateLimiterClient(conn)
	var seq atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		g := seq.Add(1)
		req := &sluicev1.CheckRequest{}
		for i := 0; i < items; i++ {
			req.Items = append(req.Items, &sluicev1.CheckItem{
				Key: "bench:" + strconv.FormatInt(g, 10) + ":" + strconv.Itoa(i),
				Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: 1_000_000_000,
					Period: durationpb.New(time.Second)}},
			})
		}
		for pb.Next() {
			if _, err := api.Check(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(b.N)/el, "calls/s")
	b.ReportMetric(float64(b.N*items)/el, "checks/s")
}

// BenchmarkCheckGRPC compares Sluice's Check over gRPC on loopback with a
// bare gRPC echo of the same message sizes, measured in the same run:
//
//	go test -run '^$' -bench . -benchtime 3s ./node/
func BenchmarkCheckGRPC(b *testing.B) {
	for _, items := range []int{1, 100} {
		b.Run(fmt.Sprintf("sluice/items=%d", items), func(b *testing.B) {
			n := startNode(b, nil)
			benchCheck(b, n.GRPCAddr(), items)
		})
		b.Run(fmt.Sprintf("echo/items=%d", items), func(b *testing.B) {
			benchCheck(b, startEcho(b), items)
		})
	}
}
