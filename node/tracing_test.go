package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// keptExporter is an in-memory exporter whose spans outlive the node's
// shutdown of its provider (the SDK's InMemoryExporter resets on Shutdown).
type keptExporter struct{ *tracetest.InMemoryExporter }

func (keptExporter) Shutdown(context.Context) error { return nil }

// newTracer is a provider that exports to exp in batches only when flushed:
// spans reach exp when the node shuts the provider down, not before.
func newTracer(exp *tracetest.InMemoryExporter) *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(keptExporter{exp}, sdktrace.WithBatchTimeout(time.Hour)))
}

// findSpan returns the span of spans named name of kind k, for which ok holds.
func findSpan(t *testing.T, where string, spans tracetest.SpanStubs, name string, k trace.SpanKind, ok func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name && s.SpanKind == k && (ok == nil || ok(s)) {
			return s
		}
	}
	var have []string
	for _, s := range spans {
		have = append(have, fmt.Sprintf("%s(%s, trace %s, parent %s)", s.Name, s.SpanKind, s.SpanContext.TraceID(), s.Parent.SpanID()))
	}
	t.Fatalf("%s: no %s span %q among %v", where, k, name, have)
	return tracetest.SpanStub{}
}

// A check sent by a traced Go client to node a, for a key node b owns:
// the client's span is continued by a's server span, and a's peer client
// span by b's peer server span, and every node flushes its spans when it
// stops.
func TestTracingFollowsAForwardedCheck(t *testing.T) {
	expA, expB, expC := tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter(), tracetest.NewInMemoryExporter()
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	a := tc.addWith("a", func(c *node.Config) { c.TracerProvider = newTracer(expA) })
	tc.addWith("b", func(c *node.Config) { c.TracerProvider = newTracer(expB) })
	tc.waitConverged()

	// The Go client traces through its DialOptions.
	ctp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(expC))
	defer func() { _ = ctp.Shutdown(context.Background()) }()
	c, err := client.New(client.Config{Addrs: []string{a.GRPCAddr()}, Timeout: 10 * time.Second, DisableRouting: true,
		DialOptions: []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(ctp), otelgrpc.WithPropagators(propagation.TraceContext{})))}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lim := client.Limit{Limit: 10, Period: time.Hour}
	key := ""
	for i := 0; key == "" && i < 1000; i++ {
		if k := fmt.Sprintf("traced-%d", i); ownerOf(t, c, k, lim).Owner == "b" {
			key = k
		}
	}
	if key == "" {
		t.Fatal("no key owned by b")
	}
	expC.Reset()
	res, err := c.Check(context.Background(), client.Item{Key: key, Limit: lim})
	if err != nil || res[0].Err != nil || !res[0].Allowed || res[0].Owner != "b" {
		t.Fatalf("check: %+v, %v; want allowed by owner b", res, err)
	}
	cspan := findSpan(t, "client", expC.GetSpans(), "sluice.v1.RateLimiter/Check", trace.SpanKindClient, nil)

	tc.stops["a"]() // ends a's peer stream: b ends its server span
	tc.stops["b"]()
	spansA, spansB := expA.GetSpans(), expB.GetSpans()
	findSpan(t, "a", spansA, "sluice.v1.RateLimiter/Check", trace.SpanKindServer, func(s tracetest.SpanStub) bool {
		return s.SpanContext.TraceID() == cspan.SpanContext.TraceID() && s.Parent.SpanID() == cspan.SpanContext.SpanID()
	})
	// Forwarded checks ride a multiplexed stream to their owner, which
	// lives as long as the peer connection: its span is the stream's.
	peer := findSpan(t, "a", spansA, "sluice.v1.Peer/CheckStream", trace.SpanKindClient, nil)
	findSpan(t, "b", spansB, "sluice.v1.Peer/CheckStream", trace.SpanKindServer, func(s tracetest.SpanStub) bool {
		return s.SpanContext.TraceID() == peer.SpanContext.TraceID() && s.Parent.SpanID() == peer.SpanContext.SpanID() && s.Parent.IsRemote()
	})
}

// Without a TracerProvider a node installs no stats handler: even with a
// recording global provider (which otelgrpc would use by default), a
// check makes no span.
func TestNoTracerProviderNoSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })
	n := startNode(t, nil)
	res, err := newClient(t, n.GRPCAddr()).Check(context.Background(), client.Item{Key: "k", Limit: client.Limit{Limit: 1, Period: time.Hour}})
	if err != nil || !res[0].Allowed {
		t.Fatalf("check: %+v, %v", res, err)
	}
	if s := rec.Started(); len(s) != 0 {
		t.Fatalf("%d spans started without a TracerProvider, want none: first %q", len(s), s[0].Name())
	}
}

// BenchmarkCheckGRPCTraced is BenchmarkCheckGRPC's one-item Check with
// tracing off and on (every call sampled, spans batched to an exporter
// that drops them): the cost of the server stats handler.
//
//	go test -run '^$' -bench CheckGRPCTraced -benchtime 3s ./node/
func BenchmarkCheckGRPCTraced(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			n := startNode(b, func(c *node.Config) {
				if on {
					c.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
						sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				}
			})
			benchCheck(b, n.GRPCAddr(), 1)
		})
	}
}
