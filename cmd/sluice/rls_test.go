package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// userAnnCaller returns a function that sends the RLS at addr a request
// of domain web with one descriptor {user: ann}.
func userAnnCaller(t *testing.T, addr string) func() *rlsv3.RateLimitResponse {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := rlsv3.NewRateLimitServiceClient(conn)
	return func() *rlsv3.RateLimitResponse {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*rlcommon.RateLimitDescriptor{
			{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: "ann"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
}

// `sluice serve` with SLUICE_RLS_CONFIG serves the Envoy RLS on its gRPC
// port; SIGHUP reloads the file; an invalid file at start exits naming
// the file, the line and the field.
func TestServeRLSConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "web.yaml")
	write := func(rpu string) {
		data := "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: " + rpu + "}\n"
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1")
	t.Setenv("SLUICE_RLS_CONFIG", file)
	s := startServer(t)
	call := userAnnCaller(t, s.grpc)
	if r := call(); r.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("first call: %v", r)
	}
	if r := call(); r.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("second call: %v, want over the limit of 1", r)
	}
	write("50")
	_ = s.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the new limit in force", func() bool { return call().GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit() == 50 })

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := sluice(t, serveArgs("--rls-config", bad)...)
	if code == 0 || !strings.Contains(out, bad+":4: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'") {
		t.Fatalf("invalid config at start: exit %d, output %s", code, out)
	}
}

// The reference's global RLS settings as flags, set here by their
// SLUICE_ env twins: global shadow mode answers OK overall (the status
// still OVER_LIMIT), and the response headers carry the names given.
func TestServeRLSSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "web.yaml")
	data := "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_RLS_CONFIG", file)
	t.Setenv("SLUICE_RLS_SHADOW_MODE", "true")
	t.Setenv("SLUICE_RLS_RESPONSE_HEADERS", "true")
	t.Setenv("SLUICE_RLS_REMAINING_HEADER", "X-Left")
	s := startServer(t, "--rls-near-limit-ratio", "0.5")
	call := userAnnCaller(t, s.grpc)
	call()
	r := call()
	if r.GetOverallCode() != rlsv3.RateLimitResponse_OK || r.GetStatuses()[0].GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("over the limit in global shadow mode: %v, want OK overall, the status OVER_LIMIT", r)
	}
	h := r.GetResponseHeadersToAdd()
	if len(h) != 3 || h[0].GetKey() != "RateLimit-Limit" || h[0].GetValue() != "1" || h[1].GetKey() != "X-Left" || h[1].GetValue() != "0" || h[2].GetKey() != "RateLimit-Reset" {
		t.Errorf("headers %v, want RateLimit-Limit: 1, X-Left: 0, RateLimit-Reset", h)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--rls-near-limit-ratio", "0"}, "RLSNearLimitRatio: must be in (0, 1], got 0"},
		{[]string{"--rls-near-limit-ratio", "1.5"}, "RLSNearLimitRatio: must be in (0, 1], got 1.5"},
		{[]string{"--rls-response-headers", "--rls-reset-header", "X Reset"}, `RLSResetHeader: "X Reset" is not an HTTP header name`},
		{[]string{"--rls-response-headers", "--rls-limit-header", ""}, `RLSLimitHeader: "" is not an HTTP header name`},
		{[]string{"--rls-shadow-mode=maybe"}, "rls-shadow-mode"},
	} {
		args := serveArgs(tt.args...)
		if code, out := sluice(t, args...); code == 0 || !strings.Contains(out, tt.want) {
			t.Errorf("%v: exit %d, output %s, want an error with %q", tt.args, code, out, tt.want)
		}
	}
}
