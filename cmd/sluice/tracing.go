package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// newTracerProvider builds the tracer provider of `sluice serve`, or nil
// when tracing is off. Tracing is on with --tracing (SLUICE_TRACING) or
// OTEL_TRACES_EXPORTER=otlp; OTEL_TRACES_EXPORTER=none with --tracing, or
// any other exporter, is an error. The OTLP/gRPC exporter reads the
// standard OTEL_EXPORTER_OTLP_* variables itself (endpoint, headers,
// insecure, timeout, compression, certificates); the resource takes
// OTEL_SERVICE_NAME (default "sluice") and OTEL_RESOURCE_ATTRIBUTES; the
// sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. A bad value is
// an error naming its variable, not a log line at the first export.
func newTracerProvider(ctx context.Context, enabled bool, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	switch v := getenv("OTEL_TRACES_EXPORTER"); v {
	case "":
	case "otlp":
		enabled = true
	case "none":
		if enabled {
			return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=none contradicts --tracing (SLUICE_TRACING)")
		}
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none", v)
	}
	if !enabled {
		return nil, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if v := getenv(name); v != "" && v != "grpc" {
			return nil, fmt.Errorf("%s=%q: sluice exports OTLP over grpc only", name, v)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if v := getenv(name); v != "" {
			if u, err := url.Parse(v); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return nil, fmt.Errorf("%s=%q: want a URL such as http://collector:4317", name, v)
			}
		}
	}
	sampler, err := samplerFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	// Later detectors win: OTEL_SERVICE_NAME over the default name.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "sluice")), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	exp, err := otlptracegrpc.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(sampler)), nil
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER names (default
// parentbased_always_on), with the ratio OTEL_TRACES_SAMPLER_ARG.
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		arg := getenv("OTEL_TRACES_SAMPLER_ARG")
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio in [0, 1]", arg)
		}
		return r, nil
	}
	name := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or their parentbased_ forms", name)
}
