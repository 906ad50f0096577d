package node_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// Concurrent checks of one key through 3 nodes, with grants in use, admit
// no more than the bucket's bound; grants answer most of them.
func TestGrantsNeverOvershoot(t *testing.T) {
	tc := newTestCluster(t, 3)
	cs := tc.clients()
	const limit = 3000
	lim := client.Limit{Limit: limit, Period: time.Hour}
	var allowed, granted, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 48; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 250; i++ {
				tc.clk.Advance(time.Microsecond) // 12,000 checks over 12ms: refill < 1 token
				res, err := cs[w%3].Check(context.Background(), client.Item{Key: "hot", Limit: lim})
				if err != nil || res[0].Err != nil {
					failed.Add(1)
					continue
				}
				if res[0].Allowed {
					allowed.Add(1)
				}
				if res[0].Source == "grant" {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	// The bound: burst + rate × elapsed = 3000 + 3000/h × 12ms < 3001.
	if a := allowed.Load(); a > limit {
		t.Fatalf("allowed %d, over the bound %d", a, limit)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d checks failed", failed.Load())
	}
	// Unspent grants are at most capacity/(2×3) per non-owner node.
	if a := allowed.Load(); a < limit-2*limit/6 {
		t.Fatalf("allowed %d, under the bound minus held grants (%d)", a, limit-2*limit/6)
	}
	if granted.Load() < 12000/3 {
		t.Fatalf("only %d of 12000 answers came from grants", granted.Load())
	}
	t.Logf("allowed %d of 12000 (bound %d), %d answered from grants", allowed.Load(), limit, granted.Load())
}

// A node refills a hot key's grant before it runs out: after warming up,
// checks do not wait for the owner.
func TestGrantsRefillAheadOfNeed(t *testing.T) {
	tc := newTestCluster(t, 3)
	n0 := tc.nodes[0]
	c := newClient(t, n0.GRPCAddr())
	lim := client.Limit{Limit: 10_000_000, Period: time.Hour}
	key := keysOwnedBy(t, c, tc.nodes[1].Name(), "refill", 1, lim)[0]
	check := func() client.Result {
		tc.clk.Advance(time.Millisecond) // 1,000 checks/s at this node
		res, err := c.Check(context.Background(), client.Item{Key: key, Limit: lim})
		if err != nil || res[0].Err != nil || !res[0].Allowed {
			t.Fatalf("check: %+v %v", res, err)
		}
		return res[0]
	}
	for i := 0; i < 500; i++ { // warm up: the rate passes the threshold
		check()
	}
	before := n0.Limiter().GrantStats()
	const n = 2000
	fromGrant := 0
	for i := 0; i < n; i++ {
		if check().Source == "grant" {
			fromGrant++
		}
	}
	after := n0.Limiter().GrantStats()
	// Without refills ahead of need, a check would wait each time a grant
	// (100 tokens at this rate) ran out: 20 times. A refill is a real RPC
	// racing the checks, so a loaded machine may let a few through.
	if misses := after.Misses - before.Misses; misses > 5 {
		t.Fatalf("%d checks waited for a grant; refills should come ahead of need", misses)
	}
	if fromGrant != n {
		t.Fatalf("%d of %d checks answered from the grant", fromGrant, n)
	}
	if reqs := after.Requests - before.Requests; float64(reqs)/n > 0.02 {
		t.Fatalf("%d grant requests for %d checks", reqs, n)
	}
	t.Logf("%d checks: %d grant requests, %d misses", n, after.Requests-before.Requests, after.Misses-before.Misses)
}

// When the owner has no tokens left, a node caches the denial until the
// retry-after and stops asking.
func TestGrantsCacheDenials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(file, []byte("policies:\n  hot:\n    limit: 12\n    period: 1h\n    grants: always\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clk := newFakeClock()
	tc := &testCluster{t: t, clk: clk, stops: map[string]func(){}}
	for _, name := range []string{"n0", "n1", "n2"} {
		tc.addWith(name, func(c *node.Config) { c.PolicyFile = file })
	}
	tc.waitConverged()
	n0 := tc.nodes[0]
	c := newClient(t, n0.GRPCAddr())
	key := ""
	for i := 0; key == ""; i++ {
		k := "deny:" + string(rune('a'+i))
		res, err := c.Usage(context.Background(), k, "hot", client.Limit{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Owner == tc.nodes[1].Name() {
			key = k
		}
	}
	allowed := 0
	for i := 0; i < 12; i++ {
		res, err := c.Check(context.Background(), client.Item{Key: key, Policy: "hot"})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed {
			allowed++
		}
	}
	if allowed != 12 {
		t.Fatalf("allowed %d of the first 12, want 12", allowed)
	}
	res, err := c.Check(context.Background(), client.Item{Key: key, Policy: "hot"})
	if err != nil || res[0].Allowed || res[0].RetryAfter <= 0 {
		t.Fatalf("13th: %+v %v, want denied with a retry-after", res, err)
	}
	before := n0.Limiter().GrantStats().Requests
	for i := 0; i < 20; i++ {
		res, err := c.Check(context.Background(), client.Item{Key: key, Policy: "hot"})
		if err != nil || res[0].Allowed || res[0].Source != "grant" {
			t.Fatalf("cached denial %d: %+v %v, want denied locally (source grant)", i, res, err)
		}
	}
	if got := n0.Limiter().GrantStats().Requests - before; got != 0 {
		t.Fatalf("%d grant requests while the denial was cached, want 0", got)
	}
}
