package node_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// startBenchCluster starts n nodes on loopback, with the real clock.
func startBenchCluster(b *testing.B, n int, mutate func(*node.Config)) []*node.Node {
	var nodes []*node.Node
	seed := ""
	for i := 0; i < n; i++ {
		cfg := node.LocalConfig(fmt.Sprintf("n%d", i))
		// Plaintext peers, as docs/benchmarks.md measured them.
		cfg.Insecure = true
		if seed != "" {
			cfg.Join = []string{seed}
		}
		if mutate != nil {
			mutate(&cfg)
		}
		nd := startNode(b, func(c *node.Config) { *c = cfg })
		if seed == "" {
			seed = nd.GossipAddr()
		}
		nodes = append(nodes, nd)
	}
	waitFor(b, 15*time.Second, "nodes converged", func() bool {
		for _, nd := range nodes {
			if r := nd.Limiter().Ring(); r == nil || r.Len() != n {
				return false
			}
		}
		return true
	})
	return nodes
}

// BenchmarkHotKey: one key, limit 10,000/s, 64 callers spread over 3
// nodes, with grants on (the default) and off. It reports admitted checks
// against the bound (burst + rate × elapsed), peer RPCs per check and
// checks/s:
//
//	go test -run '^$' -bench HotKey -benchtime 10s ./node/
func BenchmarkHotKey(b *testing.B) {
	for _, grants := range []bool{true, false} {
		b.Run(fmt.Sprintf("grants=%v", grants), func(b *testing.B) {
			nodes := startBenchCluster(b, 3, func(c *node.Config) {
				if !grants {
					c.Grants.Threshold = -1
				}
			})
			apis := make([]sluicev1.RateLimiterClient, len(nodes))
			for i, nd := range nodes {
				conn, err := grpc.NewClient(nd.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()), wire.DialOption())
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close()
				apis[i] = sluicev1.NewRateLimiterClient(conn)
			}
			const rate, burst = 10_000, 10_000
			req := &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{Key: "hot",
				Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: rate, Period: durationpb.New(time.Second), Burst: burst}}}}}
			before := peerStats(nodes)
			var allowed, done atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			const callers = 64
			for c := 0; c < callers; c++ {
				n := b.N / callers
				if c < b.N%callers {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < n; i++ {
						resp, err := apis[(c+i)%len(apis)].Check(context.Background(), req)
						if err != nil {
							b.Error(err)
							return
						}
						if resp.Results[0].Allowed {
							allowed.Add(1)
						}
						done.Add(1)
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			after := peerStats(nodes)
			bound := burst + rate*el.Seconds()
			b.ReportMetric(float64(done.Load())/el.Seconds(), "checks/s")
			b.ReportMetric(float64(allowed.Load()), "admitted")
			b.ReportMetric(bound, "bound")
			b.ReportMetric(float64(allowed.Load())/bound, "admitted/bound")
			b.ReportMetric(float64(after.CheckRPCs-before.CheckRPCs)/float64(done.Load()), "peer-rpcs/check")
			b.ReportMetric(0, "ns/op")
		})
	}
}
