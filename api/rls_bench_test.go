package api

import (
	"context"
	"fmt"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// BenchmarkShouldRateLimit: one request of 2 descriptors (a key-only
// default and a key+value rule) over a single-node limiter, in process.
//
//	go test ./api -run XXX -bench ShouldRateLimit -benchmem
func BenchmarkShouldRateLimit(b *testing.B) {
	t := &testing.T{}
	h := newRLSHarness(t, rlsConfig)
	reqs := make([]*rlcommon.RateLimitDescriptor, 0, 1024)
	for i := range 1024 {
		reqs = append(reqs, desc(fmt.Sprintf("path=/p%d", i)))
	}
	login := desc("path=/login")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := h.s.ShouldRateLimit(ctx, request("web", 0, reqs[i%len(reqs)], login)); err != nil {
			b.Fatal(err)
		}
	}
}
