package node_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
	"github.com/sluice-rl/sluice/policy"
)

func apiPolicy(limit int) string {
	return fmt.Sprintf("policies:\n  api:\n    algorithm: fixed_window\n    limit: %d\n    period: 1h\n", limit)
}

// usage reads key's usage under the policy api.
func usage(t *testing.T, c *client.Client, key string) client.Result {
	t.Helper()
	res, err := c.Usage(context.Background(), key, "api", client.Limit{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestPolicyFileWatched: the policy file is watched: a rewrite in place is
// applied within a second and the counters carry over; an invalid rewrite
// keeps the policies in force and counts as rejected; a ConfigMap-style
// "..data" swap is applied; SIGHUP (Reload) reports an invalid file.
func TestPolicyFileWatched(t *testing.T) {
	dir := t.TempDir()
	configMapSwap(t, dir, 1, map[string]string{"policies.yaml": apiPolicy(5)})
	file := filepath.Join(dir, "policies.yaml")
	n := startNode(t, func(c *node.Config) { c.PolicyFile = file; c.Clock = newFakeClock().Now })
	c := newClient(t, n.GRPCAddr())
	if _, err := c.Check(context.Background(), client.Item{Key: "k", Policy: "api", Cost: 3}); err != nil {
		t.Fatal(err)
	}
	if res := usage(t, c, "k"); res.Limit != 5 || res.Remaining != 2 {
		t.Fatalf("before a reload: %+v, want limit 5, remaining 2", res)
	}
	hash0 := n.PolicyHash()

	// The file itself rewritten in place (the symlink's target).
	writeFile(t, filepath.Join(dir, "..data", "policies.yaml"), apiPolicy(10))
	var res client.Result
	waitFor(t, time.Second, "the rewrite applied", func() bool {
		res = usage(t, c, "k")
		return res.Limit == 10
	})
	if res.Remaining != 7 {
		t.Fatalf("after the reload: remaining %d, want 10-3 = 7 (the counter kept)", res.Remaining)
	}
	if n.PolicyHash() == hash0 {
		t.Fatal("the policy hash did not change with the policies")
	}
	if got := metric(t, n, `sluice_policy_reloads_total{result="applied"}`); got != "1" {
		t.Errorf(`reloads{applied} = %q, want 1`, got)
	}

	// A ConfigMap update with an invalid file: kept, counted once.
	configMapSwap(t, dir, 2, map[string]string{"policies.yaml": "policies:\n  api:\n    limit: 0\n    period: 1h\n"})
	waitFor(t, time.Second, "the invalid update counted", func() bool {
		return metric(t, n, `sluice_policy_reloads_total{result="rejected"}`) == "1"
	})
	if res := usage(t, c, "k"); res.Limit != 10 || res.Remaining != 7 {
		t.Fatalf("after an invalid update: %+v, want the last good limit 10, remaining 7", res)
	}
	if err := n.Reload(); err == nil || !strings.Contains(err.Error(), "policies.api.limit") {
		t.Fatalf("Reload of the invalid file: %v, want an error naming policies.api.limit", err)
	}

	// A valid ConfigMap update.
	configMapSwap(t, dir, 3, map[string]string{"policies.yaml": apiPolicy(20)})
	waitFor(t, time.Second, "the ConfigMap update applied", func() bool { return usage(t, c, "k").Limit == 20 })
	if res := usage(t, c, "k"); res.Remaining != 17 {
		t.Fatalf("after the ConfigMap update: remaining %d, want 20-3 = 17", res.Remaining)
	}
	if got := metric(t, n, `sluice_policy_reloads_total{result="applied"}`); got != "2" {
		t.Errorf(`reloads{applied} = %q, want 2`, got)
	}
}

// TestPolicyHashMismatch: two nodes with different policy files gossip
// different hashes, which the Membership API, the members and the
// sluice_policy_mismatch_members gauge of both show; once one file is
// fixed (a watched reload) the mismatch clears everywhere.
func TestPolicyHashMismatch(t *testing.T) {
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "n0.yaml"), filepath.Join(dir, "n1.yaml")}
	writeFile(t, files[0], apiPolicy(10))
	writeFile(t, files[1], apiPolicy(11))
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i, name := range []string{"n0", "n1"} {
		tc.addWith(name, func(c *node.Config) { c.PolicyFile = files[i] })
	}
	tc.waitConverged()
	want, err := policy.Parse([]byte(apiPolicy(10)))
	if err != nil {
		t.Fatal(err)
	}
	n0, n1 := tc.nodes[0], tc.nodes[1]
	if n0.PolicyHash() != want.Hash() || n1.PolicyHash() == want.Hash() {
		t.Fatalf("hashes %s and %s; want n0's to be %s and n1's another", n0.PolicyHash(), n1.PolicyHash(), want.Hash())
	}
	// seen reports whether every node lists every node with its hash, and
	// every node's gauge says mismatches.
	seen := func(mismatches string) bool {
		for _, n := range tc.nodes {
			for _, m := range n.Members() {
				if o := nodeNamed(tc, m.Name); o == nil || m.PolicyHash != o.PolicyHash() {
					return false
				}
			}
			if metric(t, n, "sluice_policy_mismatch_members") != mismatches {
				return false
			}
		}
		return true
	}
	waitFor(t, 5*time.Second, "the mismatch seen by both nodes", func() bool { return seen("1") })
	_, ms, err := newClient(t, n0.GRPCAddr()).Members(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if o := nodeNamed(tc, m.Name); o == nil || m.PolicyHash != o.PolicyHash() {
			t.Fatalf("Membership API: %+v, want the policy hash of every member", ms)
		}
	}

	writeFile(t, files[1], apiPolicy(10))
	waitFor(t, 5*time.Second, "the mismatch cleared on both nodes", func() bool {
		return n1.PolicyHash() == want.Hash() && seen("0")
	})
}

func nodeNamed(tc *testCluster, name string) *node.Node {
	for _, n := range tc.nodes {
		if n.Name() == name {
			return n
		}
	}
	return nil
}
