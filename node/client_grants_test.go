package node_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/client"
)

// countingClient is a client with grants whose RPCs are counted.
func countingClient(t *testing.T, rpcs *atomic.Int64, addrs ...string) *client.Client {
	t.Helper()
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		rpcs.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := client.New(client.Config{Addrs: addrs, Timeout: 10 * time.Second,
		Grants:      &client.GrantOptions{Threshold: 10},
		DialOptions: []grpc.DialOption{grpc.WithUnaryInterceptor(count)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A client with grants answers a hot key's checks with no network hop.
func TestClientGrantsAnswerLocally(t *testing.T) {
	tc := newTestCluster(t, 3)
	var rpcs atomic.Int64
	c := countingClient(t, &rpcs, tc.nodes[0].GRPCAddr(), tc.nodes[1].GRPCAddr(), tc.nodes[2].GRPCAddr())
	lim := client.Limit{Limit: 1_000_000, Period: time.Hour}
	check := func() client.Result {
		res, err := c.Check(context.Background(), client.Item{Key: "client-hot", Limit: lim})
		if err != nil || !res[0].Allowed {
			t.Fatalf("check: %+v %v", res, err)
		}
		return res[0]
	}
	for i := 0; i < 200; i++ { // warm up past the threshold
		check()
	}
	before := rpcs.Load()
	const n = 5000
	fromGrant := 0
	for i := 0; i < n; i++ {
		if check().Source == "grant" {
			fromGrant++
		}
	}
	calls := rpcs.Load() - before
	if fromGrant < n*99/100 {
		t.Fatalf("%d of %d checks answered from the client's grant", fromGrant, n)
	}
	if float64(calls)/n > 0.01 {
		t.Fatalf("%d RPCs for %d checks, want at most 1%%", calls, n)
	}
	t.Logf("%d checks: %d RPCs, %d from the grant", n, calls, fromGrant)
}

// Two clients holding grants for one key, beside checks through the
// cluster, admit no more than the bucket allows (the clock is frozen).
func TestClientGrantsNeverOvershoot(t *testing.T) {
	tc := newTestCluster(t, 3)
	var rpcs atomic.Int64
	addrs := []string{tc.nodes[0].GRPCAddr(), tc.nodes[1].GRPCAddr(), tc.nodes[2].GRPCAddr()}
	clients := []*client.Client{countingClient(t, &rpcs, addrs...), countingClient(t, &rpcs, addrs...), newClient(t, addrs...)}
	const limit = 2000
	lim := client.Limit{Limit: limit, Period: time.Hour}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 24; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				res, err := clients[w%3].Check(context.Background(), client.Item{Key: "shared", Limit: lim})
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if a := allowed.Load(); a > limit {
		t.Fatalf("allowed %d of 7200 checks, over the limit %d", a, limit)
	}
	// Each grant client holds at most 10% of the capacity unspent.
	if a := allowed.Load(); a < limit-2*limit/10 {
		t.Fatalf("allowed %d, under the limit by more than the tokens two clients may hold", a)
	}
}
