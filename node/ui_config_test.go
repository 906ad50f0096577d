package node_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/node"
)

// /ui/data shows the node's configurations as loaded: the policy file and
// the RLS config, with their source, hash (the one the node gossips, which
// the members table shows), rule count and last load; a
// reload that changes one says "applied", a refused one "rejected" and why,
// the one in force kept.
func TestStatusPageConfigState(t *testing.T) {
	dir := t.TempDir()
	pol, rlsFile := filepath.Join(dir, "policies.yaml"), filepath.Join(dir, "web.yaml")
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(pol, "policies:\n  small:\n    limit: 1\n    period: 1h\n")
	write(rlsFile, "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n  - key: path\n")
	n := startNode(t, func(c *node.Config) { c.PolicyFile, c.RLSConfig = pol, rlsFile })
	type state struct {
		Name, Source, Hash string
		Rules              int
		LastLoad           string `json:"last_load"`
		LastResult         string `json:"last_result"`
	}
	configs := func() (policies, rls state) {
		t.Helper()
		resp, err := http.Get("http://" + n.HTTPAddr() + "/ui/data")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d struct{ Configs []state }
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || len(d.Configs) != 2 {
			t.Fatalf("/ui/data: %v, configs %+v", err, d.Configs)
		}
		return d.Configs[0], d.Configs[1]
	}
	p, r := configs()
	if p.Name != "policies" || p.Source != pol || p.Hash != n.PolicyHash() || p.Rules != 1 || p.LastResult != "loaded" || p.LastLoad == "" {
		t.Errorf("policies at start: %+v", p)
	}
	if r.Name != "rls" || r.Source != rlsFile || r.Hash != n.RLSHash() || len(r.Hash) != 16 || r.Rules != 1 || r.LastResult != "loaded" {
		t.Errorf("RLS config at start: %+v", r)
	}
	write(pol, "policies:\n  small:\n    limit: 1\n    period: 1h\n  big:\n    limit: 100\n    period: 1h\n")
	write(rlsFile, "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight}\n")
	_ = n.Reload() // the RLS config's error; logged
	p2, r2 := configs()
	if p2.Rules != 2 || p2.LastResult != "applied" || p2.Hash == p.Hash || p2.Hash != n.PolicyHash() {
		t.Errorf("policies after a reload: %+v", p2)
	}
	if r2.Rules != 1 || r2.Hash != r.Hash || !strings.HasPrefix(r2.LastResult, "rejected: ") || !strings.Contains(r2.LastResult, "fortnight") {
		t.Errorf("RLS config after a refused reload: %+v, want the one in force kept and the error", r2)
	}
}
