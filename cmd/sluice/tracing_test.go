package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestNewTracerProvider(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flag    bool
		env     map[string]string
		on      bool
		wantErr string // the variable the error names
	}{
		{name: "off by default"},
		{name: "flag", flag: true, on: true},
		{name: "OTEL_TRACES_EXPORTER=otlp", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{name: "none", env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}},
		{name: "none with the flag", flag: true, env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, wantErr: "OTEL_TRACES_EXPORTER"},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "OTEL_TRACES_EXPORTER"},
		{name: "grpc", flag: true, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "edge",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG": "0.1"}, on: true},
		{name: "http protocol", flag: true, env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "traces protocol", flag: true, env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, wantErr: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{name: "endpoint", flag: true, env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, wantErr: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "sampler", flag: true, env: map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, wantErr: "OTEL_TRACES_SAMPLER"},
		{name: "sampler arg", flag: true, env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, wantErr: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "off ignores the rest", env: map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The SDK and exporter read the process environment too.
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tp, err := newTracerProvider(context.Background(), tc.flag, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tp != nil) != tc.on {
				t.Fatalf("provider %v, want on=%v", tp, tc.on)
			}
			if tp != nil {
				if err := tp.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A bad tracing variable stops `sluice serve` before it binds anything.
func TestServeTracingBadEnv(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	var out bytes.Buffer
	err := runServe(context.Background(), []string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--peer-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "OTEL_TRACES_EXPORTER") {
		t.Fatalf("err = %v, want one naming OTEL_TRACES_EXPORTER", err)
	}
}
