package limiter_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
)

// checksByPolicy sums sluice_checks_total by its policy and result labels.
func checksByPolicy(t *testing.T, reg *prometheus.Registry) map[[2]string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_checks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k [2]string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "policy":
					k[0] = lp.GetValue()
				case "result":
					k[1] = lp.GetValue()
				}
			}
			out[k] += m.GetCounter().GetValue()
		}
	}
	return out
}

func policyLabels(c map[[2]string]float64) []string {
	seen := map[string]bool{}
	for k := range c {
		seen[k[0]] = true
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// checks_total has a policy label: one per configured policy name, and ""
// for inline limits (a request naming an unknown policy is refused whole,
// so a request's name never becomes a label); the labels follow a policy
// reload.
func TestChecksTotalByPolicy(t *testing.T) {
	set, err := policy.NewSet(true,
		policy.Policy{Name: "api", Limit: tb(2, time.Hour)},
		policy.Policy{Name: "login", Limit: tb(5, time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	l, err := limiter.New(limiter.Config{NodeName: "n1", Clock: func() time.Time { return t0 }, Policies: set, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	reqs := []limiter.Request{
		{Key: "a", Policy: "api", Cost: 1}, {Key: "a", Policy: "api", Cost: 1}, {Key: "a", Policy: "api", Cost: 1},
		{Key: "b", Policy: "login", Cost: 1},
		{Key: "c", Limit: tb(10, time.Hour), Cost: 1},
	}
	if _, err := l.Check(ctx, reqs, nil); err != nil {
		t.Fatal(err)
	}
	got := checksByPolicy(t, reg)
	for k, want := range map[[2]string]float64{
		{"api", "allowed"}: 2, {"api", "denied"}: 1, {"login", "allowed"}: 1, {"", "allowed"}: 1,
	} {
		if got[k] != want {
			t.Errorf("checks_total{policy=%q,result=%q} = %v, want %v", k[0], k[1], got[k], want)
		}
	}
	if p := policyLabels(got); len(p) != 3 || p[0] != "" || p[1] != "api" || p[2] != "login" {
		t.Errorf("policy labels %q, want \"\", api, login", p)
	}

	// A reload drops login's rows and keeps api's counts.
	set2, err := policy.NewSet(true, policy.Policy{Name: "api", Limit: tb(2, time.Hour)}, policy.Policy{Name: "new", Limit: tb(1, time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	l.SetPolicies(set2)
	if _, err := l.Check(ctx, []limiter.Request{{Key: "e", Policy: "new", Cost: 1}}, nil); err != nil {
		t.Fatal(err)
	}
	got = checksByPolicy(t, reg)
	if p := policyLabels(got); len(p) != 3 || p[0] != "" || p[1] != "api" || p[2] != "new" {
		t.Errorf("after reload, policy labels %q, want \"\", api, new", p)
	}
	if got[[2]string{"api", "allowed"}] != 2 || got[[2]string{"new", "allowed"}] != 1 {
		t.Errorf("after reload: %v", got)
	}
}
