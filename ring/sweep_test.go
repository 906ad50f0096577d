package ring

import (
	"fmt"
	"math"
	"os"
	"testing"
	"time"
)

// TestSweep compares candidate configs on random member names: the worst
// partition-share deviation by cluster size, how much a join moves relative
// to the newcomer's fair share, the stray moves of joins and leaves, and the
// build time of a 50-member ring. It measured the figures in the package
// documentation and is skipped unless RING_SWEEP is set:
//
//	RING_SWEEP=1 go test -run TestSweep -v -timeout 30m ./ring/
func TestSweep(t *testing.T) {
	if os.Getenv("RING_SWEEP") == "" {
		t.Skip("set RING_SWEEP=1 to run")
	}
	for _, cfg := range []Config{
		{PartitionCount: 7919, ReplicationFactor: 20, Load: 1.25}, // consistent's defaults, more partitions
		{PartitionCount: 7919, ReplicationFactor: 200, Load: 1.1},
		{PartitionCount: 16381, ReplicationFactor: 500, Load: 1.02},
		{PartitionCount: 16381, ReplicationFactor: 1000, Load: 1.01},
		DefaultConfig(),
	} {
		var small, large, ratio, stray float64 // small: 2..10 members, large: 11..31
		var build time.Duration
		for trial := range 90 {
			n := 2 + trial%30
			ms := named(fmt.Sprintf("n%d-%d-", trial, n), n+1)
			a, b := mustNew(t, cfg, ms[:n]), mustNew(t, cfg, ms)
			if dev := shareDeviation(a); n <= 10 {
				small = math.Max(small, dev)
			} else {
				large = math.Max(large, dev)
			}
			pc := float64(cfg.PartitionCount)
			moved, s := moveStats(a, b)
			ratio = math.Max(ratio, float64(moved)/pc*float64(n+1))
			stray = math.Max(stray, float64(s)/pc)
			_, s = moveStats(b, mustNew(t, cfg, ms[1:]))
			stray = math.Max(stray, float64(s)/pc)
		}
		start := time.Now()
		mustNew(t, cfg, sluices(50))
		build = time.Since(start)
		t.Logf("%+v: share deviation <= %4.1f%% (2-10 members), <= %4.1f%% (11-31); join moves <= %.2f × fair share; stray moves <= %.2f%%; New(50 members) %v",
			cfg, 100*small, 100*large, ratio, 100*stray, build.Round(time.Millisecond))
	}
}
