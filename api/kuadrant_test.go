package api

import (
	"context"
	"net"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
)

// kuadrantCall calls method of Kuadrant's service over conn.
func kuadrantCall(conn *grpc.ClientConn, method string, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := new(rlsv3.RateLimitResponse)
	err := conn.Invoke(ctx, "/"+KuadrantServiceName+"/"+method, req, resp)
	return resp, err
}

// Kuadrant's service over real gRPC: Report adds hits after the fact,
// answered OK whatever the count; CheckRateLimit then sees them; bad
// input is refused as ShouldRateLimit refuses it, naming the field.
func TestKuadrantReportAndCheck(t *testing.T) {
	h := newRLSHarness(t, rlsConfig)
	srv := grpc.NewServer(wire.ServerOptions()...)
	h.s.Register(srv, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), wire.DialOption())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	// path=/login: 2 a minute. A check of 1 is allowed.
	resp, err := kuadrantCall(conn, "CheckRateLimit", request("web", 1, desc("path=/login")))
	if err != nil || resp.GetOverallCode() != ok {
		t.Fatalf("first check: %v %v", resp, err)
	}
	// A report of 3 after the response: OK, no statuses, and counted.
	resp, err = kuadrantCall(conn, "Report", request("web", 3, desc("path=/login")))
	if err != nil || resp.GetOverallCode() != ok || len(resp.GetStatuses()) != 0 {
		t.Fatalf("report: %v %v, want OK with no statuses", resp, err)
	}
	resp, err = kuadrantCall(conn, "CheckRateLimit", request("web", 1, desc("path=/login")))
	if err != nil || resp.GetOverallCode() != over {
		t.Fatalf("check after the report: %v %v, want OVER_LIMIT", resp, err)
	}
	// Envoy's own service sees the same counters.
	if resp, err := h.s.ShouldRateLimit(context.Background(), request("web", 0, desc("path=/login"))); err != nil || resp.GetOverallCode() != over {
		t.Fatalf("ShouldRateLimit after the report: %v %v", resp, err)
	}
	for _, tc := range []struct {
		req   *rlsv3.RateLimitRequest
		field string
	}{
		{request("", 1, desc("path=/login")), "domain"},
		{request("web", 1), "descriptors"},
	} {
		for _, m := range []string{"Report", "CheckRateLimit"} {
			_, err := kuadrantCall(conn, m, tc.req)
			if st := status.Convert(err); err == nil || fieldOf(st) != tc.field {
				t.Errorf("%s %v: %v, want an error naming %s", m, tc.req, err, tc.field)
			}
		}
	}
	if _, err := kuadrantCall(conn, "Reserve", request("web", 1, desc("path=/login"))); status.Code(err) != codes.Unimplemented {
		t.Errorf("Reserve: %v, want Unimplemented", err)
	}
}
