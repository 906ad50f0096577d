package api

import (
	"testing"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
)

// TestRLSHitStats: a call's hits split between within_limit, near_limit
// and over_limit as the reference's base limiter splits them, for a limit
// of 10 (near-limit threshold floor(10 × 0.8) = 8) and hits_addend > 1.
func TestRLSHitStats(t *testing.T) {
	const limit = 10
	result := func(count int64) *limiter.Result {
		return &limiter.Result{Result: bucket.Result{Limit: limit, Allowed: count <= limit, Remaining: max(limit-count, 0), Count: count}}
	}
	for _, tt := range []struct {
		name  string
		r     *limiter.Result
		hits  int64
		ratio float32
		want  hitStats
	}{
		{"below the threshold", result(5), 5, 0.8, hitStats{within: 5}},
		{"up to the threshold", result(8), 3, 0.8, hitStats{within: 3}},
		{"crossing the threshold", result(9), 3, 0.8, hitStats{within: 3, near: 1}},
		{"past the threshold", result(10), 2, 0.8, hitStats{within: 2, near: 2}},
		{"crossing the limit from below the threshold", result(13), 8, 0.8, hitStats{over: 3, near: 2}},
		{"crossing the limit from past the threshold", result(12), 3, 0.8, hitStats{over: 2, near: 1}},
		{"from the limit", result(14), 4, 0.8, hitStats{over: 4}},
		{"already over", result(20), 5, 0.8, hitStats{over: 5}},
		{"one hit over", result(11), 1, 0.8, hitStats{over: 1, near: 0}},
		{"a read over", result(11), 0, 0.8, hitStats{}},
		{"a read within", result(9), 0, 0.8, hitStats{near: 0}},
		{"ratio 0.5", result(7), 4, 0.5, hitStats{within: 4, near: 2}},
		{"ratio 1: no near", result(10), 10, 1, hitStats{within: 10}},
		{"denied without its count", &limiter.Result{Result: bucket.Result{Limit: limit}}, 3, 0.8, hitStats{over: 3}},
		{"saturated", result(1<<63 - 1), 1, 0.8, hitStats{over: 1}},
	} {
		if got := hitStatsOf(tt.r, tt.hits, tt.ratio); got != tt.want {
			t.Errorf("%s: count %d, hits %d: got %+v, want %+v", tt.name, tt.r.Count, tt.hits, got, tt.want)
		}
	}
}
