package middleware_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/client/middleware"
)

// A rule with an Estimate reserves it before the handler and settles the
// cost the handler reports after it: 20 of 30 leaves 80 of 100; 130 drives the
// bucket into debt below empty and the next request is a 429 with Retry-After; a request whose
// handler reports nothing keeps its estimate; a request denied by another
// rule gives its reservation back.
func TestHTTPReportCost(t *testing.T) {
	c := newClient(t)
	tpm := client.Limit{Limit: 100, Period: time.Hour} // 36s a token: no refill to speak of during the test
	limit, err := middleware.NewHTTP(middleware.HTTPConfig{
		Client: c, FailMode: middleware.FailClosed,
		Rules: []middleware.HTTPRule{
			{Name: "tokens", Key: middleware.Header("X-Tenant"), Limit: tpm, Estimate: 30},
			{Name: "calls", Key: middleware.Header("X-Calls"), Limit: client.Limit{Limit: 1, Period: time.Hour}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("X-Used"); v != "" {
			n, _ := strconv.ParseInt(v, 10, 64)
			if !middleware.ReportCost(r.Context(), n) {
				t.Error("ReportCost under a reserving rule: false")
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	tenant := "t-" + t.Name()
	do := func(used, calls string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/chat", nil)
		r.Header.Set("X-Tenant", tenant)
		if used != "" {
			r.Header.Set("X-Used", used)
		}
		if calls != "" {
			r.Header.Set("X-Calls", calls)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	remaining := func() int64 {
		u, err := c.Usage(context.Background(), "tokens:"+tenant, "", tpm)
		if err != nil {
			t.Fatal(err)
		}
		return u.Remaining
	}
	if w := do("20", ""); w.Code != http.StatusOK || remaining() != 80 {
		t.Fatalf("reserve 30, report 20: %d, %d left, want 200 and 80", w.Code, remaining())
	}
	if w := do("", ""); w.Code != http.StatusOK || remaining() != 50 {
		t.Fatalf("no report: %d, %d left, want 200 and 50 (the estimate stands)", w.Code, remaining())
	}
	// Another rule denies: the reservation is given back.
	do("0", "c-"+t.Name()) // spends the one call, no tokens
	before := remaining()
	if w := do("", "c-"+t.Name()); w.Code != http.StatusTooManyRequests || remaining() != before {
		t.Fatalf("denied by the other rule: %d, %d left, want 429 and %d", w.Code, remaining(), before)
	}
	if w := do("130", ""); w.Code != http.StatusOK || remaining() != 0 {
		t.Fatalf("report 130 of 30: %d, %d left, want 200 and 0 (in debt)", w.Code, remaining())
	}
	w := do("1", "")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("in debt: %d Retry-After %q, want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if middleware.ReportCost(context.Background(), 1) {
		t.Error("ReportCost outside the middleware: true")
	}
}

func TestHTTPEstimateConfig(t *testing.T) {
	_, err := middleware.NewHTTP(middleware.HTTPConfig{Client: newClient(t), FailMode: middleware.FailOpen,
		Rules: []middleware.HTTPRule{{Name: "x", Key: middleware.Header("X"), Limit: client.Limit{Limit: 1, Period: time.Second}, Estimate: -1}}})
	if err == nil || !strings.Contains(err.Error(), "Rules[0].Estimate") {
		t.Fatalf("negative estimate: %v, want an error naming Rules[0].Estimate", err)
	}
}

// The gRPC interceptor's reserving rule: the handler (here an inner
// interceptor, standing for it) reports the cost from the call's
// metadata x-used; the interceptor settles it when the handler returns.
func TestGRPCReportCost(t *testing.T) {
	c := newClient(t)
	tpm := client.Limit{Limit: 100, Period: time.Hour}
	g, err := middleware.NewGRPC(middleware.GRPCConfig{Client: c, FailMode: middleware.FailClosed,
		Rules: []middleware.GRPCRule{{Name: "tokens", Key: middleware.Metadata("x-tenant"), Limit: tpm, Estimate: 30}}})
	if err != nil {
		t.Fatal(err)
	}
	report := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if v := metadata.ValueFromIncomingContext(ctx, "x-used"); len(v) > 0 {
			n, _ := strconv.ParseInt(v[0], 10, 64)
			if !middleware.ReportCost(ctx, n) {
				t.Error("ReportCost under a reserving rule: false")
			}
		}
		return handler(ctx, req)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(g.Unary(), report))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	tenant := "g-" + t.Name()
	call := func(used string) error {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", tenant, "x-used", used)
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	remaining := func() int64 {
		u, err := c.Usage(context.Background(), "tokens:"+tenant, "", tpm)
		if err != nil {
			t.Fatal(err)
		}
		return u.Remaining
	}
	if err := call("10"); err != nil || remaining() != 90 {
		t.Fatalf("reserve 30, report 10: %v, %d left, want 90", err, remaining())
	}
	if err := call("200"); err != nil || remaining() != 0 {
		t.Fatalf("report 200 of 30: %v, %d left, want 0 (emptied)", err, remaining())
	}
	if err := call("1"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("emptied: %v, want ResourceExhausted", err)
	}
}
