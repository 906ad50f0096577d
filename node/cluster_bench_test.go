package node_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/transport"
)

// runCallers makes b.N calls of one check each, spread over callers
// goroutines and over the given addresses, on 1,000 keys, and reports
// checks/s, p50 and p99 latency.
func runCallers(b *testing.B, addrs []string, callers int) {
	apis := make([]sluicev1.RateLimiterClient, len(addrs))
	for i, a := range addrs {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		apis[i] = sluicev1.NewRateLimiterClient(conn)
	}
	reqs := make([]*sluicev1.CheckRequest, 1000)
	for k := range reqs {
		reqs[k] = &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{
			Key:  "bench:" + strconv.Itoa(k),
			Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: 1_000_000_000, Period: durationpb.New(time.Second)}},
		}}}
	}
	lat := make([][]time.Duration, callers)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < callers; c++ {
		n := b.N / callers
		if c < b.N%callers {
			n++
		}
		lat[c] = make([]time.Duration, 0, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				k := (c*7919 + i*31) % len(reqs)
				t0 := time.Now()
				if _, err := apis[(c+i)%len(apis)].Check(context.Background(), reqs[k]); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(all))/el.Seconds(), "checks/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCluster3 runs a 3-node cluster on loopback, built by node.New
// as in production: calls of one check spread over the nodes, 1,000 keys,
// 8 and 64 concurrent callers, beside a bare one-hop gRPC echo of the same
// messages measured in the same run:
//
//	go test -run '^$' -bench Cluster3 -benchtime 20000x ./node/
func BenchmarkCluster3(b *testing.B) {
	for _, callers := range []int{8, 64} {
		b.Run(fmt.Sprintf("sluice/callers=%d", callers), func(b *testing.B) {
			var nodes []*node.Node
			var addrs []string
			seed := ""
			for i := 0; i < 3; i++ {
				cfg := node.LocalConfig(fmt.Sprintf("n%d", i))
				// Plaintext peers, as docs/benchmarks.md measured them.
				cfg.Insecure = true
				if seed != "" {
					cfg.Join = []string{seed}
				}
				n := startNode(b, func(c *node.Config) { *c = cfg })
				if seed == "" {
					seed = n.GossipAddr()
				}
				nodes = append(nodes, n)
				addrs = append(addrs, n.GRPCAddr())
			}
			waitFor(b, 15*time.Second, "3 nodes converged", func() bool {
				for _, n := range nodes {
					if r := n.Limiter().Ring(); r == nil || r.Len() != 3 {
						return false
					}
				}
				return true
			})
			before := peerStats(nodes)
			runCallers(b, addrs, callers)
			after := peerStats(nodes)
			fwd := after.ForwardedItems - before.ForwardedItems
			rpcs := after.CheckRPCs - before.CheckRPCs
			if fwd > 0 {
				b.ReportMetric(float64(rpcs)/float64(fwd), "peer-rpcs/fwd-check")
				b.ReportMetric(float64(fwd)/float64(rpcs), "items/batch")
			}
		})
		b.Run(fmt.Sprintf("echo/callers=%d", callers), func(b *testing.B) {
			runCallers(b, []string{startEcho(b)}, callers)
		})
	}
}

// peerStats sums the nodes' peer counters.
func peerStats(nodes []*node.Node) (sum transport.PeerStats) {
	for _, n := range nodes {
		s := n.PeerStats()
		sum.CheckRPCs += s.CheckRPCs
		sum.ForwardedItems += s.ForwardedItems
	}
	return sum
}
