package api

import (
	"context"
	"fmt"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkShouldRateLimit: requests of one descriptor (a key-only
// default over 1,024 values, as sluice bench --rls sends) and of two (and
// a key+value rule), over a single-node limiter, in process; the requests
// are built before the timer starts.
//
//	go test ./api -run XXX -bench ShouldRateLimit -benchmem
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("descriptors=%d", n), func(b *testing.B) {
			t := &testing.T{}
			h := newRLSHarness(t, rlsConfig)
			login := desc("path=/login")
			reqs := make([]*rlsv3.RateLimitRequest, 0, 1024)
			for i := range 1024 {
				ds := []*rlcommon.RateLimitDescriptor{desc(fmt.Sprintf("path=/p%d", i)), login}
				reqs = append(reqs, request("web", 0, ds[:n]...))
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := h.s.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
