package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// keysOwnedBy returns n keys (with prefix) whose owner, asked through c, is
// the node named owner.
func keysOwnedBy(t *testing.T, c *client.Client, owner, prefix string, n int, lim client.Limit) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n && i < 10_000; i++ {
		k := fmt.Sprintf("%s:%d", prefix, i)
		if ownerOf(t, c, k, lim).Owner == owner {
			out = append(out, k)
		}
	}
	if len(out) < n {
		t.Fatalf("found %d keys owned by %s, want %d", len(out), owner, n)
	}
	return out
}

// countAllowed sends checks of key through c and counts admissions, failing
// on any error or on an answer that did not come from the fallback.
func countAllowed(t *testing.T, c *client.Client, key string, lim client.Limit, checks int, wantSource string) int {
	t.Helper()
	allowed := 0
	for i := 0; i < checks; i++ {
		res, err := c.Check(context.Background(), client.Item{Key: key, Limit: lim})
		if err != nil {
			t.Fatal(err)
		}
		r := res[0]
		if r.Err != nil {
			t.Fatalf("check %d of %s: %v", i, key, r.Err)
		}
		if r.Source != wantSource {
			t.Fatalf("check %d of %s: source %q, want %q", i, key, r.Source, wantSource)
		}
		if r.Allowed {
			allowed++
		}
	}
	return allowed
}

// Each failure mode holds when the owner cannot be reached, both with its
// gRPC port closed (still a gossip member) and with the process gone.
func TestFallbackModes(t *testing.T) {
	for _, fault := range []struct {
		name string
		f    node.Fault
	}{{"grpc port closed", node.FaultGRPCDown}, {"process gone", node.FaultCrash}} {
		t.Run(fault.name, func(t *testing.T) {
			// Without replication: the local share answers (with it, the
			// key's heir does: replication_test.go).
			tc := newTestCluster0(t, 3, func(c *node.Config) { c.Replicas = 0 })
			c := newClient(t, tc.nodes[0].GRPCAddr())
			owner := tc.nodes[2]
			local := client.Limit{Limit: 30, Period: time.Hour, FailureMode: client.FailLocal}
			deny := client.Limit{Limit: 30, Period: time.Hour, FailureMode: client.FailDeny}
			allow := client.Limit{Limit: 30, Period: time.Hour, FailureMode: client.FailAllow}
			// The same period gives the same identity, so one key list
			// serves all three modes.
			ks := keysOwnedBy(t, c, owner.Name(), "fb", 3, local)
			conc := client.Limit{Algorithm: client.Concurrency, Limit: 6}
			leaseKey := keysOwnedBy(t, c, owner.Name(), "fb-lease", 1, conc)[0]
			owner.Inject(fault.f)

			// A lease under the local share (6/3 = 2) is held and
			// released on this node.
			l1, err := c.Acquire(context.Background(), leaseKey, "", conc, 2, time.Minute)
			if err != nil || !l1.Allowed || !strings.HasPrefix(l1.ID, "local-") {
				t.Fatalf("fallback acquire: %+v %v, want a local lease", l1, err)
			}
			if l2, err := c.Acquire(context.Background(), leaseKey, "", conc, 1, time.Minute); err != nil || l2.Allowed {
				t.Fatalf("second fallback acquire: %+v %v, want denied (share of 2 held)", l2, err)
			}
			if ok, err := c.Release(context.Background(), l1); err != nil || !ok {
				t.Fatalf("fallback release: %v %v", ok, err)
			}

			// local: a share of 30/3 = 10 on this node.
			if got := countAllowed(t, c, ks[0], local, 20, "fallback"); got != 10 {
				t.Errorf("local: %d of 20 allowed, want the share 10", got)
			}
			if got := countAllowed(t, c, ks[1], deny, 5, "fallback"); got != 0 {
				t.Errorf("deny: %d of 5 allowed, want 0", got)
			}
			if got := countAllowed(t, c, ks[2], allow, 50, "fallback"); got != 50 {
				t.Errorf("allow: %d of 50 allowed, want 50", got)
			}
			res, err := c.Check(context.Background(), client.Item{Key: ks[1], Limit: deny})
			if err != nil || res[0].Owner != owner.Name() || res[0].RetryAfter <= 0 {
				t.Fatalf("deny result %+v %v: want the unreachable owner named and a retry-after", res, err)
			}
			if fault.f == node.FaultCrash {
				// Once memberlist declares it dead, the keys have a new
				// owner and the owner's count rules again, once the
				// dead wait is over (the new owner answers from the
				// failure mode until then: docs/failure.md).
				waitFor(t, 20*time.Second, "the crashed owner leaves the ring", func() bool {
					r := tc.nodes[0].Limiter().Ring()
					_, still := r.Member(owner.Name())
					return !still
				})
				waitFor(t, 10*time.Second, "the new owner's answer", func() bool {
					res, err := c.Check(context.Background(), client.Item{Key: ks[0], Limit: local})
					if err != nil || res[0].Source != "owner" && res[0].Source != "fallback" {
						t.Fatalf("after the ring moved: %+v %v, want the owner's answer or the failure mode's", res, err)
					}
					return res[0].Source == "owner" && res[0].Owner != owner.Name()
				})
			}
		})
	}
}
