package node_test

import (
	"context"
	"fmt"
	"slices"
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

// BenchmarkOwnerLoss crashes (as kill -9 would) the owner of 20 busy keys
// while 16 callers check them through the two other nodes, and reports the
// latency of the checks answered in the first second after the crash, the
// slowest check overall, and the admissions over the whole run against the
// documented bound: before the crash the keys' own bound; after it, each
// surviving node's local share (limit/3) of the remaining time.
//
//	go test -run '^$' -bench OwnerLoss -benchtime 1x ./node/
func BenchmarkOwnerLoss(b *testing.B) {
	for i := 0; i < b.N; i++ {
		nodes := startBenchCluster(b, 3, nil)
		victim := nodes[2]
		apis := make([]sluicev1.RateLimiterClient, 2)
		for i, nd := range nodes[:2] {
			conn, err := grpc.NewClient(nd.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()), wire.DialOption())
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			apis[i] = sluicev1.NewRateLimiterClient(conn)
		}
		const rate = 200 // per key per second, burst = rate
		lim := &sluicev1.Limit{Limit: rate, Period: durationpb.New(time.Second)}
		var reqs []*sluicev1.CheckRequest
		for k := 0; len(reqs) < 20; k++ {
			req := &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{Key: fmt.Sprintf("busy:%d", k), Spec: &sluicev1.CheckItem_Limit{Limit: lim}}}}
			resp, err := apis[0].Check(context.Background(), &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{Key: req.Items[0].Key, Cost: new(int64), Spec: req.Items[0].Spec}}})
			if err != nil {
				b.Fatal(err)
			}
			if resp.Results[0].Owner == victim.Name() {
				reqs = append(reqs, req)
			}
		}
		type sample struct {
			at, took time.Duration
			allowed  bool
			source   sluicev1.Source
		}
		var mu sync.Mutex
		var samples []sample
		var errs atomic.Int64
		start := time.Now()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := 0; c < 16; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []sample
				for i := 0; ; i++ {
					select {
					case <-stop:
						mu.Lock()
						samples = append(samples, local...)
						mu.Unlock()
						return
					default:
					}
					t0 := time.Now()
					resp, err := apis[c%2].Check(context.Background(), reqs[(c+i)%len(reqs)])
					if err != nil || resp.Results[0].Error != nil {
						errs.Add(1)
						continue
					}
					r := resp.Results[0]
					local = append(local, sample{t0.Sub(start), time.Since(t0), r.Allowed, r.Source})
				}
			}()
		}
		time.Sleep(2 * time.Second) // load before the crash: a duration of the scenario, not a wait for a condition
		crashAt := time.Since(start)
		victim.Inject(node.FaultCrash)
		var movedAt time.Duration
		waitFor(b, 20*time.Second, "the ring drops the crashed owner", func() bool {
			for _, nd := range nodes[:2] {
				if _, ok := nd.Limiter().Ring().Member(victim.Name()); ok {
					return false
				}
			}
			movedAt = time.Since(start)
			return true
		})
		time.Sleep(2 * time.Second) // the scenario goes on for 2s after the move
		close(stop)
		wg.Wait()
		total := time.Since(start)

		var first []time.Duration
		var worst time.Duration
		admitted, fallback := 0, 0
		for _, s := range samples {
			worst = max(worst, s.took)
			if s.allowed {
				admitted++
			}
			if s.source == sluicev1.Source_SOURCE_FALLBACK {
				fallback++
			}
			if s.at >= crashAt && s.at < crashAt+time.Second {
				first = append(first, s.took)
			}
		}
		slices.Sort(first)
		// The bound per key: the bucket's own up to the crash; the two
		// survivors' local shares (burst/3 + rate/3 × t each) until the ring
		// moves; then a fresh bucket on the new owner (the crashed owner's
		// count is lost), plus up to TTL of tokens granted before the move.
		keys := float64(len(reqs))
		before := keys * (rate + rate*crashAt.Seconds())
		during := keys * 2 * (float64(rate)/3 + float64(rate)/3*(movedAt-crashAt).Seconds())
		after := keys * (rate + rate*(total-movedAt).Seconds())
		b.ReportMetric(float64(len(samples))/total.Seconds(), "checks/s")
		if len(first) > 0 {
			b.ReportMetric(float64(first[len(first)*99/100].Microseconds())/1000, "p99-first-second-ms")
		}
		b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(errs.Load()), "errors")
		b.ReportMetric(float64(fallback), "fallback-answers")
		b.ReportMetric(float64(admitted), "admitted")
		b.ReportMetric(before+during+after, "bound")
		b.ReportMetric((movedAt - crashAt).Seconds(), "s-until-ring-moved")
		b.ReportMetric(0, "ns/op")
	}
}
