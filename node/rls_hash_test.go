package node_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/node"
)

// TestRLSHashMismatch: two nodes whose RLS configurations differ (the
// policies alike) gossip different RLS hashes beside equal policy hashes,
// which the Membership API, the members and the
// sluice_rls_config_mismatch_members gauge of both show, while
// sluice_policy_mismatch_members stays 0; once one file is fixed (a
// watched reload) the mismatch clears everywhere.
func TestRLSHashMismatch(t *testing.T) {
	dir := t.TempDir()
	dirs := []string{filepath.Join(dir, "n0"), filepath.Join(dir, "n1")}
	for i, d := range dirs {
		writeFile(t, filepath.Join(d, "web.yaml"), rlsYAML(10+990*i, "second"))
	}
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i, name := range []string{"n0", "n1"} {
		tc.addWith(name, func(c *node.Config) { c.RLSConfig = dirs[i] })
	}
	tc.waitConverged()
	n0, n1 := tc.nodes[0], tc.nodes[1]
	if len(n0.RLSHash()) != 16 || n0.RLSHash() == n1.RLSHash() {
		t.Fatalf("RLS hashes %q and %q; want two different ones of 16 digits", n0.RLSHash(), n1.RLSHash())
	}
	seen := func(mismatches string) bool {
		for _, n := range tc.nodes {
			for _, m := range n.Members() {
				if o := nodeNamed(tc, m.Name); o == nil || m.RLSHash != o.RLSHash() || m.PolicyHash != o.PolicyHash() {
					return false
				}
			}
			if metric(t, n, "sluice_rls_config_mismatch_members") != mismatches || metric(t, n, "sluice_policy_mismatch_members") != "0" {
				return false
			}
		}
		return true
	}
	waitFor(t, 5*time.Second, "the RLS mismatch seen by both nodes", func() bool { return seen("1") })
	_, ms, err := newClient(t, n0.GRPCAddr()).Members(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if o := nodeNamed(tc, m.Name); o == nil || m.RLSHash != o.RLSHash() {
			t.Fatalf("Membership API: %+v, want the RLS hash of every member", ms)
		}
	}

	writeFile(t, filepath.Join(dirs[1], "web.yaml"), rlsYAML(10, "second"))
	waitFor(t, 5*time.Second, "the RLS mismatch cleared on both nodes", func() bool {
		return n1.RLSHash() != "" && seen("0")
	})
}
