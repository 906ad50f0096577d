package node_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

var (
	ipLimit   = client.Limit{Limit: 10, Period: time.Hour}
	userLimit = client.Limit{Algorithm: client.FixedWindow, Limit: 2, Period: time.Hour}
)

// An atomic check over real gRPC and HTTP charges no item unless all are
// allowed: ip:1 is not charged by the calls user:43 denies.
func TestAtomicCheckChargesNothingWhenDenied(t *testing.T) {
	clk := newFakeClock()
	n := startNode(t, func(c *node.Config) { c.Clock = clk.Now })
	c := newClient(t, n.GRPCAddr())
	ctx := context.Background()
	items := []client.Item{{Key: "ip:1", Limit: ipLimit}, {Key: "user:43", Limit: userLimit}}
	for i := 0; i < 2; i++ {
		res, err := c.CheckAtomic(ctx, items...)
		if err != nil || !res[0].Allowed || !res[1].Allowed {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
	}
	res, err := c.CheckAtomic(ctx, items...)
	if err != nil || res[0].Allowed || res[1].Allowed || res[1].RetryAfter <= 0 || res[0].Remaining != 8 {
		t.Fatalf("third call: %+v %v; want both denied, user's retry after, ip at 8", res, err)
	}
	if got := keyRemaining(t, c, "ip:1", ipLimit); got != 8 {
		t.Fatalf("ip:1 after a denied atomic call: %d left, want 8", got)
	}
	// Over HTTP: 429, and ip:1 still at 8.
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://"+n.HTTPAddr()+"/v1/check", "application/json", strings.NewReader(
		`{"checks":[{"key":"ip:1","limit":10,"period":"1h"},{"key":"user:43","limit":2,"period":"1h","algorithm":"fixed_window"}],"atomic":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("HTTP atomic: %d, want 429", resp.StatusCode)
	}
	if got := keyRemaining(t, c, "ip:1", ipLimit); got != 8 {
		t.Fatalf("ip:1 after a denied HTTP atomic call: %d left, want 8", got)
	}
	// The same batch not atomic charges ip:1 (the documented default).
	if res, err := c.Check(ctx, items...); err != nil || !res[0].Allowed || res[1].Allowed {
		t.Fatalf("plain check: %+v %v", res, err)
	}
	if got := keyRemaining(t, c, "ip:1", ipLimit); got != 7 {
		t.Fatalf("ip:1 after a plain check: %d left, want 7", got)
	}
	// A concurrency item is refused, naming it; nothing is charged.
	_, err = c.CheckAtomic(ctx, client.Item{Key: "ip:1", Limit: ipLimit}, client.Item{Key: "job", Limit: client.Limit{Algorithm: client.Concurrency, Limit: 2}})
	if st, _ := status.FromError(errors.Unwrap(err)); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "items[1].limit.algorithm") {
		t.Fatalf("concurrency item: %v", err)
	}
}

// Under concurrency over real gRPC: calls of an own key and a shared scarce
// key admit exactly the shared key's limit, and charge each own key exactly
// the calls admitted (the audit), with the clock frozen.
func TestAtomicCheckConcurrentAudit(t *testing.T) {
	clk := newFakeClock()
	n := startNode(t, func(c *node.Config) { c.Clock = clk.Now })
	c := newClient(t, n.GRPCAddr())
	shared := client.Limit{Limit: 30, Period: time.Hour}
	own := client.Limit{Algorithm: client.SlidingWindow, Limit: 1000, Period: time.Hour}
	const workers, calls = 8, 20
	var admitted atomic.Int64
	perKey := make([]atomic.Int64, workers)
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				res, err := c.CheckAtomic(context.Background(), client.Item{Key: fmt.Sprintf("own:%d", g), Limit: own}, client.Item{Key: "shared", Limit: shared})
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed != res[1].Allowed {
					t.Errorf("mixed verdicts %+v", res)
				}
				if res[0].Allowed {
					admitted.Add(1)
					perKey[g].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 30 {
		t.Fatalf("admitted %d calls, want exactly 30", admitted.Load())
	}
	for g := range perKey {
		if used := 1000 - keyRemaining(t, c, fmt.Sprintf("own:%d", g), own); used != perKey[g].Load() {
			t.Fatalf("own:%d charged %d for %d admitted calls", g, used, perKey[g].Load())
		}
	}
}

// On a cluster, an atomic check of keys that all live on another node is
// forwarded there and decided all or nothing; one of keys on several nodes
// is decided by reservations on each owner: allowed, every key is charged;
// denied, none is.
func TestAtomicCheckOnCluster(t *testing.T) {
	tc := newTestCluster(t, 3)
	c := newClient(t, tc.nodes[0].GRPCAddr())
	byOwner := map[string][]client.Item{}
	for i := 0; len(byOwner["n0"]) < 2 || len(byOwner["n1"]) < 2 || len(byOwner["n2"]) < 1; i++ {
		it := client.Item{Key: fmt.Sprintf("k:%d", i), Limit: userLimit}
		o := ownerOf(t, c, it.Key, userLimit).Owner
		byOwner[o] = append(byOwner[o], it)
	}
	a, b := byOwner["n1"][0], byOwner["n1"][1]
	b.Cost = 2
	res, err := c.CheckAtomic(context.Background(), a, b)
	if err != nil || !res[0].Allowed || !res[1].Allowed || res[0].Owner != "n1" {
		t.Fatalf("keys of n1 through n0: %+v %v", res, err)
	}
	// b is spent: a second call is denied and a is not charged.
	if res, err = c.CheckAtomic(context.Background(), a, b); err != nil || res[0].Allowed || res[1].Allowed {
		t.Fatalf("second call: %+v %v, want denied", res, err)
	}
	if got := keyRemaining(t, c, a.Key, userLimit); got != 1 {
		t.Fatalf("%s after a denied call: %d left, want 1", a.Key, got)
	}
	// Keys of two owners, b spent: denied, and neither n0's key nor a is
	// charged.
	x := byOwner["n0"][0]
	res, err = c.CheckAtomic(context.Background(), x, a, b)
	if err != nil || res[0].Allowed || res[1].Allowed || res[2].Allowed || res[2].RetryAfter <= 0 {
		t.Fatalf("keys of two owners, one spent: %+v %v, want all denied, the spent one with a retry", res, err)
	}
	if got := keyRemaining(t, c, x.Key, userLimit); got != 2 {
		t.Fatalf("%s after a denied call: %d left, want 2", x.Key, got)
	}
	if got := keyRemaining(t, c, a.Key, userLimit); got != 1 {
		t.Fatalf("%s after a denied call: %d left, want 1", a.Key, got)
	}
	// Keys of three owners, all with room: allowed, each charged.
	y, z := byOwner["n0"][1], byOwner["n2"][0]
	y.Cost = 2
	res, err = c.CheckAtomic(context.Background(), y, a, z)
	if err != nil || !res[0].Allowed || !res[1].Allowed || !res[2].Allowed {
		t.Fatalf("keys of three owners: %+v %v, want all allowed", res, err)
	}
	for _, k := range []struct {
		it   client.Item
		want int64
	}{{y, 0}, {a, 0}, {z, 1}} {
		if got := keyRemaining(t, c, k.it.Key, userLimit); got != k.want {
			t.Fatalf("%s after an allowed call: %d left, want %d", k.it.Key, got, k.want)
		}
	}
}

// Concurrent atomic checks of two keys on two owners: exactly the limit is
// admitted, and each key is charged for the admitted calls only.
func TestAtomicCheckAcrossOwnersConcurrent(t *testing.T) {
	tc := newTestCluster(t, 3)
	c := newClient(t, tc.nodes[0].GRPCAddr())
	lim := client.Limit{Algorithm: client.FixedWindow, Limit: 10, Period: time.Hour}
	byOwner := map[string]string{}
	for i := 0; len(byOwner) < 2; i++ {
		k := fmt.Sprintf("pair:%d", i)
		byOwner[ownerOf(t, c, k, lim).Owner] = k
	}
	var keys []string
	for _, k := range byOwner {
		keys = append(keys, k)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				res, err := c.CheckAtomic(context.Background(), client.Item{Key: keys[0], Limit: lim}, client.Item{Key: keys[1], Limit: lim})
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed != res[1].Allowed {
					t.Errorf("mixed verdicts %+v", res)
				}
				if res[0].Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n > 10 || n < 1 {
		t.Fatalf("admitted %d calls, want 1 to 10", n)
	}
	for _, k := range keys {
		if used := 10 - keyRemaining(t, c, k, lim); used != admitted.Load() {
			t.Fatalf("%s charged %d for %d admitted calls", k, used, admitted.Load())
		}
	}
}

// BenchmarkCheck2GRPC is a Check of two items over gRPC on one node,
// plain or atomic (the cost of all-or-nothing).
func BenchmarkCheck2GRPC(b *testing.B) {
	n := startNode(b, nil)
	c := newClient(b, n.GRPCAddr())
	lim := client.Limit{Limit: 1_000_000_000, Period: time.Second}
	items := []client.Item{{Key: "bench:a", Limit: lim}, {Key: "bench:b", Limit: lim}}
	for _, mode := range []string{"plain", "atomic"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				var err error
				if mode == "atomic" {
					_, err = c.CheckAtomic(context.Background(), items...)
				} else {
					_, err = c.Check(context.Background(), items...)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The audit through forwarding: callers on two nodes send atomic calls of
// an own key and a shared scarce key, all owned by a third node; exactly
// the shared key's limit is admitted, and each own key is charged exactly
// the calls admitted.
func TestAtomicCheckForwardedConcurrentAudit(t *testing.T) {
	tc := newTestCluster(t, 3)
	c0, c2 := newClient(t, tc.nodes[0].GRPCAddr()), newClient(t, tc.nodes[2].GRPCAddr())
	shared := client.Limit{Limit: 20, Period: time.Hour}
	own := client.Limit{Algorithm: client.FixedWindow, Limit: 1000, Period: time.Hour}
	var sharedKey string
	var owns []string
	for i := 0; sharedKey == "" || len(owns) < 4; i++ {
		k := fmt.Sprintf("k:%d", i)
		if sharedKey == "" && ownerOf(t, c0, k, shared).Owner == "n1" {
			sharedKey = k
		} else if ownerOf(t, c0, k, own).Owner == "n1" && len(owns) < 4 {
			owns = append(owns, k)
		}
	}
	var admitted atomic.Int64
	perKey := make([]atomic.Int64, len(owns))
	var wg sync.WaitGroup
	for g := range owns {
		c := []*client.Client{c0, c2}[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				res, err := c.CheckAtomic(context.Background(), client.Item{Key: owns[g], Limit: own}, client.Item{Key: sharedKey, Limit: shared})
				if err != nil {
					t.Error(err)
					return
				}
				if res[0].Allowed {
					admitted.Add(1)
					perKey[g].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 20 {
		t.Fatalf("admitted %d calls, want exactly 20", admitted.Load())
	}
	for g, k := range owns {
		if used := 1000 - keyRemaining(t, c0, k, own); used != perKey[g].Load() {
			t.Fatalf("%s charged %d for %d admitted calls", k, used, perKey[g].Load())
		}
	}
}
