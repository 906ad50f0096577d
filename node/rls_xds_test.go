package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/node"
	"github.com/sluice-rl/sluice/rls/xds"
	"github.com/sluice-rl/sluice/rls/xds/xdstest"
)

// withXDS sets a node to take its RLS configuration from srv.
func withXDS(srv *xdstest.Server) func(*node.Config) {
	return func(c *node.Config) {
		s := xds.DefaultSettings()
		s.ServerURL, s.NodeID = srv.Addr, "sluice"
		s.BackoffInitial, s.BackoffMax, s.ConnectRetryInterval = 10*time.Millisecond, 100*time.Millisecond, 10*time.Millisecond
		c.RLSXDS = &s
	}
}

// The YAML of a conformance case's files, as a test decodes it to build
// the RateLimitConfig a management server would push.
type (
	confYAML struct {
		Domain      string     `yaml:"domain"`
		Descriptors []confDesc `yaml:"descriptors"`
	}
	confDesc struct {
		Key            string     `yaml:"key"`
		Value          string     `yaml:"value"`
		RateLimit      *confLimit `yaml:"rate_limit"`
		Descriptors    []confDesc `yaml:"descriptors"`
		ShadowMode     bool       `yaml:"shadow_mode"`
		DetailedMetric bool       `yaml:"detailed_metric"`
		QuotaMode      bool       `yaml:"quota_mode"`
		ValueToMetric  bool       `yaml:"value_to_metric"`
		ShareThreshold bool       `yaml:"share_threshold"`
	}
	confLimit struct {
		Unit            string `yaml:"unit"`
		RequestsPerUnit uint32 `yaml:"requests_per_unit"`
		Unlimited       bool   `yaml:"unlimited"`
		Name            string `yaml:"name"`
		Replaces        []struct {
			Name string `yaml:"name"`
		} `yaml:"replaces"`
	}
)

// xdsResources builds a case's RateLimitConfigs, one per file, named by
// the file; unsupported says what the RateLimitConfig of
// go-control-plane/ratelimit v0.1.0 cannot carry (quota_mode,
// value_to_metric, share_threshold, units beyond DAY), if anything.
func xdsResources(t *testing.T, dir string) (out []*rlsconf.RateLimitConfig, unsupported string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var y confYAML
		if err := yaml.Unmarshal(b, &y); err != nil {
			return nil, fmt.Sprintf("%s: %v", e.Name(), err)
		}
		descs, why := xdsDescriptors(y.Descriptors)
		if why != "" {
			return nil, e.Name() + ": " + why
		}
		out = append(out, &rlsconf.RateLimitConfig{Name: e.Name(), Domain: y.Domain, Descriptors: descs})
	}
	return out, ""
}

func xdsDescriptors(ds []confDesc) ([]*rlsconf.RateLimitDescriptor, string) {
	var out []*rlsconf.RateLimitDescriptor
	for _, d := range ds {
		switch {
		case d.QuotaMode:
			return nil, "quota_mode"
		case d.ValueToMetric:
			return nil, "value_to_metric"
		case d.ShareThreshold:
			return nil, "share_threshold"
		}
		pd := &rlsconf.RateLimitDescriptor{Key: d.Key, Value: d.Value, ShadowMode: d.ShadowMode, DetailedMetric: d.DetailedMetric}
		if l := d.RateLimit; l != nil {
			unit, ok := rlsconf.RateLimitUnit_value[strings.ToUpper(l.Unit)]
			if !ok && l.Unit != "" {
				return nil, "unit " + l.Unit
			}
			pd.RateLimit = &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit(unit), RequestsPerUnit: l.RequestsPerUnit,
				Unlimited: l.Unlimited, Name: l.Name}
			for _, r := range l.Replaces {
				pd.RateLimit.Replaces = append(pd.RateLimit.Replaces, &rlsconf.RateLimitReplace{Name: r.Name})
			}
		}
		var why string
		if pd.Descriptors, why = xdsDescriptors(d.Descriptors); why != "" {
			return nil, why
		}
		out = append(out, pd)
	}
	return out, ""
}

// TestRLSConformanceXDS: the conformance cases of TestRLSConformance, each
// case's configuration pushed by a go-control-plane SotW server instead of
// read from its files: the node answers as envoyproxy/ratelimit did. Cases
// whose files use what the RateLimitConfig proto served here cannot carry
// are skipped, saying what.
func TestRLSConformanceXDS(t *testing.T) {
	for _, c := range loadConformance(t) {
		t.Run(c.name, func(t *testing.T) {
			res, unsupported := xdsResources(t, c.configDir)
			if unsupported != "" {
				t.Skipf("not expressible as a go-control-plane/ratelimit v0.1.0 RateLimitConfig: %s", unsupported)
			}
			srv := xdstest.Start(t, "sluice")
			srv.Push(t, "1", res...)
			clk := newFakeClock()
			clk.ns.Store(c.steps[0].SentUnixNano)
			n := startNode(t, func(cfg *node.Config) {
				withXDS(srv)(cfg)
				cfg.Clock = clk.Now
			})
			srv.WaitAcked(t, "1")
			replay(t, c, clk, []rlspb.RateLimitServiceClient{rlsClient(t, n.GRPCAddr())})
		})
	}
}

// TestRLSXDSUpdate: a pushed update is applied with the counters kept and
// its hash gossiped; an invalid push is NACKed, counted, and the
// configuration in force kept.
func TestRLSXDSUpdate(t *testing.T) {
	web := func(rpu uint32) *rlsconf.RateLimitConfig {
		return &rlsconf.RateLimitConfig{Name: "web", Domain: "web", Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "user",
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: rpu}}}}
	}
	srv := xdstest.Start(t, "sluice")
	srv.Push(t, "1", web(5))
	n := startNode(t, func(c *node.Config) { withXDS(srv)(c); c.Clock = newFakeClock().Now })
	srv.WaitAcked(t, "1")
	c := rlsClient(t, n.GRPCAddr())
	if st := shouldRateLimit(t, c, userReq("bob", 3)).GetStatuses()[0]; st.GetLimitRemaining() != 2 {
		t.Fatalf("v1: %v, want 2 remaining of 5", st)
	}
	h1 := n.RLSHash()

	srv.Push(t, "2", web(10))
	srv.WaitAcked(t, "2")
	st := shouldRateLimit(t, c, userReq("bob", -1)).GetStatuses()[0]
	if st.GetCurrentLimit().GetRequestsPerUnit() != 10 || st.GetLimitRemaining() != 7 {
		t.Fatalf("after the push: %v, want limit 10 with 10-3 = 7 remaining (the counter kept)", st)
	}
	if n.RLSHash() == h1 {
		t.Errorf("RLS hash %s unchanged by the push", h1)
	}

	bad := web(1)
	bad.Descriptors[0].RateLimit.Unit = rlsconf.RateLimitUnit_UNKNOWN
	srv.Push(t, "3", bad)
	srv.WaitNacks(t, 1)
	if nack := srv.Nacks()[0]; !strings.Contains(nack, "descriptors[0].rate_limit.unit") {
		t.Errorf("NACK %q does not name the field", nack)
	}
	if st := shouldRateLimit(t, c, userReq("bob", -1)).GetStatuses()[0]; st.GetCurrentLimit().GetRequestsPerUnit() != 10 {
		t.Fatalf("after an invalid push: %v, want the last good limit 10", st)
	}
	if got := metric(t, n, "ratelimit_service_config_load_error"); got != "1" {
		t.Errorf("config_load_error = %q, want 1 (the server's resends of the same resources not counted)", got)
	}
}
