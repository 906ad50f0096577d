package client_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-rl/sluice/client"
)

// BenchmarkCheck compares one check per call through the routed stream
// transport (the default) with a unary Check call per check
// (DisableRouting), on one node: with one caller ("idle": every check
// finds the stream idle, so this is the latency a lone check pays) and
// with many (coalescing). Run: go test -run '^$' -bench Check -benchtime 3s ./client/
func BenchmarkCheck(b *testing.B) {
	for _, mode := range []struct {
		name string
		cfg  client.Config
	}{{"stream", client.Config{}}, {"unary", client.Config{DisableRouting: true}}} {
		for _, par := range []int{0, 16} {
			name := fmt.Sprintf("%s/idle", mode.name)
			if par > 0 {
				name = fmt.Sprintf("%s/callers=%d", mode.name, par*2)
			}
			b.Run(name, func(b *testing.B) {
				tc := newCluster(b, 1)
				cfg := mode.cfg
				cfg.Addrs = tc.addrs()
				c, err := client.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				it := client.Item{Key: "k", Limit: client.Limit{Limit: 1e9, Period: 1e9}}
				if _, err := c.Check(context.Background(), it); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				if par == 0 {
					for i := 0; i < b.N; i++ {
						if _, err := c.Check(context.Background(), it); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := c.Check(context.Background(), it); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
