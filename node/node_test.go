package node_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// TestMain checks that no test leaves a goroutine behind.
//
// One goroutine of memberlist's own outlives its Shutdown: a probe in
// flight waits for its ack or its timeout (ProbeTimeout, under a second),
// then returns. A test that silenced a member's gossip (suspicion tests)
// may end during one.
//
// Started as BenchmarkNodeCheck's client, the binary runs that instead.
func TestMain(m *testing.M) {
	if benchClientMain() { // BenchmarkNodeCheck's client process
		return
	}
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}

// fakeClock is a settable clock for nodes under test.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// startNode runs a node built by the production constructor on :0 ports and
// stops it when the test ends.
func startNode(t testing.TB, mutate func(*node.Config)) *node.Node {
	t.Helper()
	cfg := node.LocalConfig("n1")
	if mutate != nil {
		mutate(&cfg)
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, 5*time.Second, "node ready", n.Ready)
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newClient returns a client that sends every check to the given nodes
// (not routing to owners), so that tests see each node's own behaviour:
// forwarding, grants, fallback.
func newClient(t testing.TB, addrs ...string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Addrs: addrs, Timeout: 10 * time.Second, DisableRouting: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// 64 goroutines × 1,000 checks on one key through the gRPC API admit exactly
// the bound. The clock is frozen, so the bound is exactly the burst.
func TestConcurrentChecksAdmitExactlyTheBound(t *testing.T) {
	clk := newFakeClock()
	n := startNode(t, func(c *node.Config) { c.Clock = clk.Now })
	c := newClient(t, n.GRPCAddr())
	const workers, each, limit = 64, 1000, 10_000
	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				res, err := c.Check(context.Background(), client.Item{Key: "hot", Limit: client.Limit{Limit: limit, Period: time.Hour}})
				if err != nil {
					errs <- err
					return
				}
				if res[0].Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("check: %v", err)
	}
	if got := allowed.Load(); got != limit {
		t.Errorf("allowed %d of %d checks, want exactly %d", got, workers*each, limit)
	}
	if got := denied.Load(); got != workers*each-limit {
		t.Errorf("denied %d, want %d", got, workers*each-limit)
	}
}

// A token bucket of 10 per hour admits ten, then denies with a retry-after
// of one emission interval, then refills.
func TestCheckDeniesAndRefills(t *testing.T) {
	clk := newFakeClock()
	n := startNode(t, func(c *node.Config) { c.Clock = clk.Now })
	c := newClient(t, n.GRPCAddr())
	ctx := context.Background()
	item := client.Item{Key: "user:42", Limit: client.Limit{Limit: 10, Period: time.Hour}}
	for i := 0; i < 10; i++ {
		res, err := c.Check(ctx, item)
		if err != nil {
			t.Fatal(err)
		}
		if !res[0].Allowed || res[0].Remaining != int64(9-i) {
			t.Fatalf("check %d: allowed=%v remaining=%d, want true %d", i, res[0].Allowed, res[0].Remaining, 9-i)
		}
		if res[0].Source != "owner" || res[0].Owner != "n1" {
			t.Fatalf("check %d: source=%q owner=%q", i, res[0].Source, res[0].Owner)
		}
	}
	res, err := c.Check(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Allowed || res[0].RetryAfter != 6*time.Minute {
		t.Fatalf("11th: allowed=%v retry_after=%s, want denied after 6m", res[0].Allowed, res[0].RetryAfter)
	}
	u, err := c.Usage(ctx, "user:42", "", item.Limit)
	if err != nil {
		t.Fatal(err)
	}
	if u.Remaining != 0 || u.Limit != 10 {
		t.Fatalf("usage: remaining=%d limit=%d, want 0 of 10", u.Remaining, u.Limit)
	}
	clk.Advance(6 * time.Minute)
	res, err = c.Check(ctx, item)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Allowed {
		t.Fatalf("after 6m: denied, want allowed")
	}
}

// Bad input is InvalidArgument naming the field.
func TestCheckInvalidArgumentNamesField(t *testing.T) {
	n := startNode(t, nil)
	c := newClient(t, n.GRPCAddr())
	ctx := context.Background()
	ok := client.Limit{Limit: 10, Period: time.Minute}
	long := make([]byte, 1025)
	for i := range long {
		long[i] = 'k'
	}
	cases := []struct {
		name  string
		items []client.Item
		field string
	}{
		{"empty key", []client.Item{{Key: "", Limit: ok}}, "items[0].key"},
		{"long key", []client.Item{{Key: string(long), Limit: ok}}, "items[0].key"},
		{"limit 0", []client.Item{{Key: "k", Limit: client.Limit{Limit: 0, Period: time.Minute}}}, "items[0].limit.limit"},
		{"limit -1", []client.Item{{Key: "k", Limit: client.Limit{Limit: -1, Period: time.Minute}}}, "items[0].limit.limit"},
		{"period 0", []client.Item{{Key: "k", Limit: client.Limit{Limit: 1}}}, "items[0].limit.period"},
		{"period > 1y", []client.Item{{Key: "k", Limit: client.Limit{Limit: 1, Period: 400 * 24 * time.Hour}}}, "items[0].limit.period"},
		{"negative cost", []client.Item{{Key: "k", Limit: ok, Cost: -1}}, "items[0].cost"},
		{"unknown algorithm", []client.Item{{Key: "k", Limit: client.Limit{Algorithm: 99, Limit: 1, Period: time.Second}}}, "items[0].limit.algorithm"},
		{"unknown policy", []client.Item{{Key: "k", Policy: "nope"}}, "items[0].policy"},
		{"second item bad", []client.Item{{Key: "a", Limit: ok}, {Key: "b", Limit: client.Limit{Limit: -1, Period: time.Second}}}, "items[1].limit.limit"},
		{"too many items", make([]client.Item, 1001), "items"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Check(ctx, tc.items...)
			st, _ := status.FromError(errors.Unwrap(err))
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
			if got := st.Message(); len(got) < len(tc.field) || got[:len(tc.field)+1] != tc.field+":" {
				t.Fatalf("message %q does not name field %q", got, tc.field)
			}
		})
	}
	// A rejected batch consumed nothing: the valid first item is untouched.
	u, err := c.Usage(ctx, "a", "", ok)
	if err != nil {
		t.Fatal(err)
	}
	if u.Remaining != 10 {
		t.Fatalf("after a rejected batch, remaining = %d, want 10", u.Remaining)
	}
}

// Concurrency leases: acquire up to the limit, deny, release, acquire again.
func TestAcquireRelease(t *testing.T) {
	n := startNode(t, nil)
	c := newClient(t, n.GRPCAddr())
	ctx := context.Background()
	lim := client.Limit{Limit: 2}
	l1, err := c.Acquire(ctx, "tenant:a", "", lim, 1, time.Minute)
	if err != nil || !l1.Allowed || l1.ID == "" {
		t.Fatalf("acquire 1: %+v %v", l1, err)
	}
	l2, err := c.Acquire(ctx, "tenant:a", "", lim, 1, time.Minute)
	if err != nil || !l2.Allowed {
		t.Fatalf("acquire 2: %+v %v", l2, err)
	}
	l3, err := c.Acquire(ctx, "tenant:a", "", lim, 1, time.Minute)
	if err != nil || l3.Allowed {
		t.Fatalf("acquire 3: %+v %v, want denied", l3, err)
	}
	ok, err := c.Release(ctx, l1)
	if err != nil || !ok {
		t.Fatalf("release: %v %v (lease %+v)", ok, err, l1)
	}
	ok, err = c.Release(ctx, l1)
	if err != nil || ok {
		t.Fatalf("second release: %v %v, want false", ok, err)
	}
	l4, err := c.Acquire(ctx, "tenant:a", "", lim, 1, time.Minute)
	if err != nil || !l4.Allowed {
		t.Fatalf("acquire after release: %+v %v", l4, err)
	}
}

// Shutdown reports not ready, then Run returns nil.
func TestShutdownIsClean(t *testing.T) {
	cfg := node.LocalConfig("n1")
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	waitFor(t, 5*time.Second, "ready", n.Ready)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if n.Ready() {
		t.Fatal("still ready after shutdown")
	}
}

// New fails cleanly, closing what it opened, when a port is taken.
func TestNewPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := node.LocalConfig("busy")
	cfg.HTTPAddr = ln.Addr().String()
	n, err := node.New(cfg)
	if err == nil || n != nil || !strings.Contains(err.Error(), "http listen") {
		t.Fatalf("New with a taken HTTP port = %v, %v; want an error naming the http listener", n, err)
	}
}
