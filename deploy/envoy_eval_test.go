package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/sluice-rl/sluice/rls"
)

// request is an HTTP request as the rate limit actions see it.
type request struct {
	method, path, remote string
	headers              map[string]string
}

func (r request) header(name string) (string, bool) {
	switch name {
	case ":method":
		return r.method, true
	case ":path":
		return r.path, true
	}
	v, ok := r.headers[strings.ToLower(name)]
	return v, ok
}

// headerMatches is Envoy's HeaderMatcher for the forms the doc uses.
func headerMatches(t *testing.T, r request, m *routev3.HeaderMatcher) bool {
	v, ok := r.header(m.GetName())
	if !ok {
		return false
	}
	sm := m.GetStringMatch()
	switch {
	case sm == nil:
		t.Fatalf("header matcher %v: only string_match is evaluated here", m)
	case sm.GetExact() != "":
		return v == sm.GetExact()
	case sm.GetPrefix() != "":
		return strings.HasPrefix(v, sm.GetPrefix())
	default:
		t.Fatalf("string matcher %v: only exact and prefix are evaluated here", sm)
	}
	return false
}

// descriptors evaluates rate_limits on a request as Envoy's route does
// (the action types the doc uses): each rate_limit gives one descriptor,
// or none when an action does not apply.
func descriptors(t *testing.T, limits []*routev3.RateLimit, r request) [][]rls.KV {
	t.Helper()
	var out [][]rls.KV
next:
	for _, l := range limits {
		var d []rls.KV
		for _, a := range l.GetActions() {
			switch {
			case a.GetRemoteAddress() != nil:
				d = append(d, rls.KV{Key: "remote_address", Value: r.remote})
			case a.GetRequestHeaders() != nil:
				rh := a.GetRequestHeaders()
				v, ok := r.header(rh.GetHeaderName())
				if !ok {
					if rh.GetSkipIfAbsent() {
						continue
					}
					continue next
				}
				d = append(d, rls.KV{Key: rh.GetDescriptorKey(), Value: v})
			case a.GetGenericKey() != nil:
				g := a.GetGenericKey()
				d = append(d, rls.KV{Key: cmpOr(g.GetDescriptorKey(), "generic_key"), Value: g.GetDescriptorValue()})
			case a.GetHeaderValueMatch() != nil:
				h := a.GetHeaderValueMatch()
				match := true
				for _, m := range h.GetHeaders() {
					match = match && headerMatches(t, r, m)
				}
				expect := h.GetExpectMatch() == nil || h.GetExpectMatch().GetValue()
				if match != expect {
					continue next
				}
				d = append(d, rls.KV{Key: cmpOr(h.GetDescriptorKey(), "header_match"), Value: h.GetDescriptorValue()})
			default:
				t.Fatalf("action %v: not evaluated by this test", a)
			}
		}
		out = append(out, d)
	}
	return out
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// describe is "[(k, v), ...] <rule>", the rule as the RLS service finds it.
func describe(cfg *rls.Config, d []rls.KV) string {
	parts := make([]string, len(d))
	for i, e := range d {
		parts[i] = fmt.Sprintf("(%s, %s)", e.Key, e.Value)
	}
	s := "[" + strings.Join(parts, ", ") + "] "
	m, _ := rls.Lookup(cfg, "edge", d)
	switch r := m.Rule; {
	case r == nil:
		return s + "no rule"
	case r.Unlimited:
		return s + r.FullKey + " unlimited"
	case r.ShadowMode:
		return s + fmt.Sprintf("%s %d/%s shadow", r.FullKey, r.RequestsPerUnit, r.Unit)
	default:
		return s + fmt.Sprintf("%s %d/%s", r.FullKey, r.RequestsPerUnit, r.Unit)
	}
}

func checkRules(t *testing.T, where string, cfg *rls.Config, got [][]rls.KV, want []string) {
	t.Helper()
	var g []string
	for _, d := range got {
		g = append(g, describe(cfg, d))
	}
	if !slices.Equal(g, want) {
		t.Errorf("%s:\n got %q\nwant %q", where, g, want)
	}
}

// checkBootstrap checks the envoy.yaml: the filter calls a cluster that
// speaks HTTP/2, and each example request of the doc's table gets the
// descriptors and rules the table says.
func checkBootstrap(t *testing.T, where string, bs *bootstrapv3.Bootstrap, cfg *rls.Config) {
	t.Helper()
	f := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0]
	var hcm hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := hcm.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	rl := rateLimitFilter(t, where, hcm.GetHttpFilters()[0])
	if !cfg.HasDomain(rl.GetDomain()) {
		t.Errorf("%s: domain %q is not the rules' (%v)", where, rl.GetDomain(), cfg.Domains())
	}
	clusterName := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
	found := false
	for _, c := range bs.GetStaticResources().GetClusters() {
		if c.GetName() == clusterName {
			found = true
			if _, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]; !ok {
				t.Errorf("%s: cluster %s has no HTTP/2 options: gRPC needs them", where, clusterName)
			}
		}
	}
	if !found {
		t.Errorf("%s: no cluster %q", where, clusterName)
	}

	routes := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	const ip = "203.0.113.7"
	remote := "[(remote_address, 203.0.113.7)] edge.remote_address 600/MINUTE"
	for _, tc := range []struct {
		name string
		req  request
		want []string
	}{
		{"GET /", request{method: "GET", path: "/"}, []string{remote}},
		{"an API key", request{method: "GET", path: "/", headers: map[string]string{"x-api-key": "k1"}},
			[]string{remote, "[(api_key, k1)] edge.api_key 1000/HOUR"}},
		{"the batch job's key", request{method: "GET", path: "/items", headers: map[string]string{"x-api-key": "internal-batch"}},
			[]string{remote, "[(api_key, internal-batch)] edge.api_key_internal-batch unlimited"}},
		{"search", request{method: "GET", path: "/search?q=x"},
			[]string{remote, "[(generic_key, search)] edge.generic_key_search 50/SECOND"}},
		{"POST /login", request{method: "POST", path: "/login"},
			[]string{remote, "[(login, post), (remote_address, 203.0.113.7)] edge.login_post.remote_address 5/MINUTE"}},
		{"GET /login", request{method: "GET", path: "/login"}, []string{remote}},
		{"a tenant", request{method: "GET", path: "/", headers: map[string]string{"x-tenant": "t1"}},
			[]string{remote, "[(tenant, t1)] edge.tenant 10000/HOUR shadow"}},
	} {
		tc.req.remote = ip
		var route *routev3.Route
		for _, r := range routes {
			if strings.HasPrefix(tc.req.path, r.GetMatch().GetPrefix()) {
				route = r
				break
			}
		}
		if route == nil {
			t.Errorf("%s: %s: no route", where, tc.name)
			continue
		}
		checkRules(t, where+" "+tc.name, cfg, descriptors(t, route.GetRoute().GetRateLimits(), tc.req), tc.want)
	}
	// Deeper than any rule: answered OK without a limit.
	if got := describe(cfg, []rls.KV{{Key: "api_key", Value: "k1"}, {Key: "x", Value: "y"}}); !strings.HasSuffix(got, "no rule") {
		t.Errorf("a descriptor deeper than the rules: %s", got)
	}
}
