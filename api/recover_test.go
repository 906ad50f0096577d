package api

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// panicky is a Service whose Check panics on the key "boom".
type panicky struct{ *limiter.Limiter }

func (p panicky) Check(ctx context.Context, reqs []limiter.Request, out []limiter.Result) ([]limiter.Result, error) {
	for _, r := range reqs {
		if r.Key == "boom" {
			panic("boom")
		}
	}
	return p.Limiter.Check(ctx, reqs, out)
}

// A handler that panics answers INTERNAL, on a unary call and in a
// CheckStream goroutine, counts the panic in sluice_panics_total and
// leaves the process and the server serving.
func TestGRPCRecoversPanics(t *testing.T) {
	lim := newTestLimiter(t, "")
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	_, conn := serveGRPC(t, GRPCConfig{Service: panicky{lim}, Metrics: m, Recovery: m.Recovery(nil)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := sluicev1.NewRateLimiterClient(conn)

	_, err = c.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{streamItem("boom", 5)}})
	if status.Code(err) != codes.Internal {
		t.Fatalf("unary Check that panics: %v, want Internal", err)
	}
	st, err := c.CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&sluicev1.CheckStreamRequest{Id: 7, Items: []*sluicev1.CheckItem{streamItem("boom", 5)}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetId() != 7 || len(resp.GetResults()) != 1 || resp.GetResults()[0].GetError().GetCode() != int32(codes.Internal) {
		t.Fatalf("stream message that panics: %+v, want one INTERNAL item error", resp)
	}
	// The same stream and the server go on.
	if err := st.Send(&sluicev1.CheckStreamRequest{Id: 8, Items: []*sluicev1.CheckItem{streamItem("fine", 5)}}); err != nil {
		t.Fatal(err)
	}
	if resp, err = st.Recv(); err != nil || !resp.GetResults()[0].GetAllowed() {
		t.Fatalf("after the panic: %+v, %v", resp, err)
	}
	if got := testutil.ToFloat64(m.panics.WithLabelValues(sluicev1.RateLimiter_Check_FullMethodName)); got != 1 {
		t.Errorf("panics of Check = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.panics.WithLabelValues(sluicev1.RateLimiter_CheckStream_FullMethodName)); got != 1 {
		t.Errorf("panics of CheckStream = %v, want 1", got)
	}
}
