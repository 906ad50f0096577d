package node_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/node"
)

// BenchmarkRingChange measures how long a join and a graceful leave take
// to reach every node's ring (the ring of the last applied epoch), on 3
// nodes on loopback with the local preset: each iteration starts a fourth
// node (the time from node.New until all four rings list it), then stops
// it gracefully (from the cancel of its Run until the three rings no
// longer list it). It reports the p50 and p99 of each over b.N rounds.
//
//	go test -run '^$' -bench RingChange -benchtime 20x ./node/
func BenchmarkRingChange(b *testing.B) {
	nodes := startBenchCluster(b, 3, nil)
	seed := nodes[0].GossipAddr()
	rings := func(want int, extra *node.Node) bool {
		all := nodes
		if extra != nil {
			all = append(slices.Clone(nodes), extra)
		}
		for _, nd := range all {
			if r := nd.Limiter().Ring(); r == nil || r.Len() != want {
				return false
			}
		}
		return true
	}
	var joins, leaves []time.Duration
	for i := 0; i < b.N; i++ {
		cfg := node.LocalConfig(fmt.Sprintf("j%d", i))
		cfg.Insecure = true
		cfg.Join = []string{seed}
		start := time.Now()
		nd, err := node.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- nd.Run(ctx) }()
		waitTight(b, 20*time.Second, "the joiner on every ring", func() bool { return rings(4, nd) })
		joins = append(joins, time.Since(start))
		start = time.Now()
		cancel()
		waitTight(b, 20*time.Second, "the leaver off every ring", func() bool { return rings(3, nil) })
		leaves = append(leaves, time.Since(start))
		if err := <-done; err != nil {
			b.Fatalf("Run: %v", err)
		}
	}
	pct := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(joins, 0.5), "join-p50-ms")
	b.ReportMetric(pct(joins, 0.99), "join-p99-ms")
	b.ReportMetric(pct(leaves, 0.5), "leave-p50-ms")
	b.ReportMetric(pct(leaves, 0.99), "leave-p99-ms")
}

// waitTight is waitFor polling every millisecond, for timing a condition.
func waitTight(b *testing.B, d time.Duration, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}
