package node

import (
	"context"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
)

// tracingServerOptions are the options that trace a gRPC server's RPCs
// with Config.TracerProvider (an otelgrpc server stats handler, taking the
// caller's W3C trace context). Without a provider there are none: no
// handler is installed, so tracing off costs nothing. Nothing global is
// read: the propagator and the (no-op) meter provider are given.
func (c *Config) tracingServerOptions() []grpc.ServerOption {
	if c.TracerProvider == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(c.TracerProvider),
		otelgrpc.WithPropagators(propagation.TraceContext{}),
		otelgrpc.WithMeterProvider(noop.NewMeterProvider()),
	))}
}

// tracerShutdown is what a TracerProvider that the node shuts down has (the
// SDK's *trace.TracerProvider does).
type tracerShutdown interface {
	Shutdown(context.Context) error
}

// shutdownTracing flushes and stops Config.TracerProvider, if it can be
// shut down, within 5 seconds (ShutdownTimeout if shorter), once the servers and the peer client have
// ended their spans. A collector that cannot be reached loses the spans
// held, which is logged: it does not fail the node's shutdown.
func (n *Node) shutdownTracing() {
	tp, ok := n.cfg.TracerProvider.(tracerShutdown)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(5*time.Second, n.cfg.ShutdownTimeout))
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		n.log.Warn("tracing: spans not flushed at shutdown", "err", err)
	}
}
