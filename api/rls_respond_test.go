package api

import (
	"context"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
)

// headers are response_headers_to_add with the default names; nil is none.
func headers(limit, remaining, reset string) []*core.HeaderValue {
	return []*core.HeaderValue{
		{Key: DefaultLimitHeader, Value: limit},
		{Key: DefaultRemainingHeader, Value: remaining},
		{Key: DefaultResetHeader, Value: reset},
	}
}

// TestRLSResponseHeaders: with ResponseHeaders, the reference's rate
// limit headers of the descriptor closest to its limit: the last one over
// it (shadow_mode and quota_mode ones are not "over"), else the first with
// the least remaining; none without a limited descriptor. The clock is
// 10.5 s into a minute.
func TestRLSResponseHeaders(t *testing.T) {
	withHeaders := func(c *RLSConfig) { c.ResponseHeaders = true }
	for _, tt := range []struct {
		name string
		reqs []*rlsv3.RateLimitRequest // all but the last prepare
		want []*core.HeaderValue
	}{
		{"one descriptor", []*rlsv3.RateLimitRequest{request("web", 0, desc("path=/a"))}, headers("5", "4", "50")},
		{"whitelisted: none", []*rlsv3.RateLimitRequest{request("web", 0, desc("path=/health"))}, nil},
		{"unlimited: none", []*rlsv3.RateLimitRequest{request("web", 0, desc("user=vip"))}, nil},
		{"unknown domain: none", []*rlsv3.RateLimitRequest{request("elsewhere", 0, desc("path=/a"))}, nil},
		{"the least remaining", []*rlsv3.RateLimitRequest{request("web", 0, desc("path=/a"), desc("path=/login"), desc("path=/health"))}, headers("2", "1", "50")},
		{"a tie: the first", []*rlsv3.RateLimitRequest{request("web", 0, withHits(desc("path=/a"), 1), withHits(desc("tenant=t,ip=1"), 6))}, headers("5", "4", "50")},
		{"a tie, reversed", []*rlsv3.RateLimitRequest{request("web", 0, withHits(desc("tenant=t,ip=1"), 6), withHits(desc("path=/a"), 1))}, headers("10", "4", "50")},
		{"over wins", []*rlsv3.RateLimitRequest{request("web", 0, withHits(desc("path=/login"), 3), desc("path=/a"))}, headers("2", "0", "50")},
		{"the last over", []*rlsv3.RateLimitRequest{request("web", 0, withHits(desc("path=/login"), 3), desc("zero=z"), desc("path=/a"))}, headers("0", "0", "43190")},
		{"shadow_mode over: remaining 0", []*rlsv3.RateLimitRequest{request("web", 0, desc("path=/a"), withHits(desc("shadow=s"), 2))}, headers("1", "0", "1")},
		{"quota_mode over: remaining 0", []*rlsv3.RateLimitRequest{request("web", 0, desc("path=/a"), withHits(desc("quota=q"), 2))}, headers("1", "0", "1")},
		{"after earlier calls", []*rlsv3.RateLimitRequest{
			request("web", 3, desc("path=/a")),
			request("web", 0, desc("path=/a"), desc("tenant=t,ip=1")),
		}, headers("5", "1", "50")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newRLSHarness(t, rlsConfig, withHeaders)
			var resp *rlsv3.RateLimitResponse
			for _, req := range tt.reqs {
				var err error
				if resp, err = h.s.ShouldRateLimit(context.Background(), req); err != nil {
					t.Fatal(err)
				}
			}
			if got := resp.GetResponseHeadersToAdd(); !equalHeaders(got, tt.want) {
				t.Errorf("headers %v, want %v", got, tt.want)
			}
		})
	}
	// Named otherwise; and none without ResponseHeaders.
	h := newRLSHarness(t, rlsConfig, func(c *RLSConfig) {
		c.ResponseHeaders, c.LimitHeader, c.RemainingHeader, c.ResetHeader = true, "X-Limit", "X-Left", "X-Reset"
	})
	resp, err := h.s.ShouldRateLimit(context.Background(), request("web", 0, desc("path=/a")))
	want := []*core.HeaderValue{{Key: "X-Limit", Value: "5"}, {Key: "X-Left", Value: "4"}, {Key: "X-Reset", Value: "50"}}
	if err != nil || !equalHeaders(resp.GetResponseHeadersToAdd(), want) {
		t.Errorf("renamed: %v %v, want %v", resp.GetResponseHeadersToAdd(), err, want)
	}
	h = newRLSHarness(t, rlsConfig)
	if resp, err := h.s.ShouldRateLimit(context.Background(), request("web", 0, desc("path=/a"))); err != nil || resp.GetResponseHeadersToAdd() != nil {
		t.Errorf("disabled: %v %v, want no headers", resp.GetResponseHeadersToAdd(), err)
	}
}

// overridden sets a descriptor's limit override.
func overridden(d *rlcommon.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit) *rlcommon.RateLimitDescriptor {
	d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

func equalHeaders(a, b []*core.HeaderValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestRLSGlobalShadowMode: with ShadowMode, a call over the limit is
// answered OK overall, its statuses still OVER_LIMIT, and counted in
// global_shadow_mode; the counters count as without it.
func TestRLSGlobalShadowMode(t *testing.T) {
	for _, tt := range []struct {
		name    string
		req     *rlsv3.RateLimitRequest
		overall rlsv3.RateLimitResponse_Code
		status  *rlsv3.RateLimitResponse_DescriptorStatus
		counted float64
	}{
		{"within", request("web", 0, desc("path=/login")), ok, status_(ok, limit(2, minute, ""), 1, 50), 0},
		{"over", request("web", 3, desc("path=/login")), ok, status_(over, limit(2, minute, ""), 0, 50), 1},
		{"over, a limit override", request("web", 2, overridden(desc("path=/x"), 1, typev3.RateLimitUnit_MINUTE)),
			ok, status_(over, limit(1, minute, ""), 0, 50), 1},
		{"rule shadow_mode only", request("web", 2, desc("shadow=s")), ok, status_(ok, limit(1, sec, ""), 0, 1), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, global := range []bool{false, true} {
				h := newRLSHarness(t, rlsConfig, func(c *RLSConfig) { c.ShadowMode = global })
				overall := tt.overall
				if !global && tt.status.Code == over {
					overall = over
				}
				h.expect(0, tt.req, overall, tt.status)
				want := tt.counted
				if !global {
					want = 0
				}
				if got := testutil.ToFloat64(h.s.metrics.globalShadow); got != want {
					t.Errorf("global %v: global_shadow_mode = %v, want %v", global, got, want)
				}
			}
		})
	}
}
