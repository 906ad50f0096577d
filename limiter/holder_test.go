package limiter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// A lease is bound to the Holder that acquired it, on the owner reached by
// forwarding and in a fallback local share alike: the same ID and key from
// another holder, or from none, release nothing and the lease stays held.
func TestLeaseBoundToHolder(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	ctx := context.Background()
	conc := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 6}
	key := c.KeysOwnedBy("n1", "n0", "held", limiter.Request{Limit: conc}, 1)[0]
	n1 := c.Node("n1")
	check := func(stage, wantSource string, wantPrefix string) {
		t.Helper()
		a, err := n1.Acquire(ctx, limiter.AcquireRequest{Request: limiter.Request{Key: key, Limit: conc, Cost: 1}, TTL: time.Hour, Holder: "A"})
		if err != nil || !a.Allowed || a.Source.String() != wantSource || !strings.HasPrefix(a.ID, wantPrefix) {
			t.Fatalf("%s: acquire = %+v, %v; want allowed from %s", stage, a, err, wantSource)
		}
		rel := func(holder string) (bool, int64) {
			t.Helper()
			ok, res, err := n1.Release(ctx, limiter.ReleaseRequest{Request: limiter.Request{Key: key, Limit: conc}, LeaseID: a.ID, Holder: holder})
			if err != nil || res.Err != nil {
				t.Fatalf("%s: release as %q: %v %v", stage, holder, err, res.Err)
			}
			return ok, res.Remaining
		}
		for _, other := range []string{"B", ""} {
			if ok, rem := rel(other); ok || rem != a.Remaining {
				t.Fatalf("%s: release as %q = %v, remaining %d; want false, %d (still held)", stage, other, ok, rem, a.Remaining)
			}
		}
		if ok, _ := rel("A"); !ok {
			t.Fatalf("%s: the holder could not release", stage)
		}
	}
	check("forwarded to the owner", "owner", "")
	c.Net.Isolate("n0")
	check("fallback local share", "fallback", "local-")
}
