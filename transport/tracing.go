package transport

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// tracingDialOption is the stats handler that traces the peer RPCs with tp
// and propagates their trace context (W3C traceparent) to the owner. Nothing
// global is read: the propagator and the (no-op) meter provider are given.
func tracingDialOption(tp trace.TracerProvider) grpc.DialOption {
	return grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(propagation.TraceContext{}),
		otelgrpc.WithMeterProvider(noop.NewMeterProvider()),
	))
}
