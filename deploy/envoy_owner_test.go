package deploy

import (
	"os"
	"slices"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/rls"
)

// ownerListener names the listener of docs/envoy.md's "Reaching a
// descriptor's owner" bootstrap.
const ownerListener = "ingress-owner"

// composeNodes are the node names of deploy/compose's cluster, in order.
func composeNodes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Environment map[string]any `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	var names []string
	for svc, s := range c.Services {
		name, _ := s.Environment["SLUICE_NODE_NAME"].(string)
		if name != svc {
			t.Fatalf("compose service %s: SLUICE_NODE_NAME %q, want the service's name", svc, name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// endpointHosts are the host names of a cluster's endpoints, by priority.
func endpointHosts(c *clusterv3.Cluster) map[uint32][]string {
	out := map[uint32][]string{}
	for _, le := range c.GetLoadAssignment().GetEndpoints() {
		for _, e := range le.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			if sa.GetPortValue() == 8081 {
				out[le.GetPriority()] = append(out[le.GetPriority()], sa.GetAddress())
			}
		}
	}
	for p := range out {
		slices.Sort(out[p])
	}
	return out
}

// checkOwnerBootstrap checks docs/envoy.md's bootstrap that asks a fixed
// descriptor's owner: stage 0's filter calls the round-robin cluster of
// every node; each other stage's filter calls a cluster of one node at
// priority 0 (health checked, HTTP/2) and every other node at priority 1;
// every rate limit entry of a stage above 0 gives a descriptor fixed by
// the route (the same on every request), matched by a rule of the rules,
// whose counter that priority-0 node owns in deploy/compose's cluster (the
// ring the nodes build, the counter's identity as the RLS checks it).
func checkOwnerBootstrap(t *testing.T, where string, bs *bootstrapv3.Bootstrap, cfg *rls.Config) {
	t.Helper()
	nodes := composeNodes(t)
	members := make([]ring.Member, len(nodes))
	for i, n := range nodes {
		members[i] = ring.Member{Name: n}
	}
	rg, err := ring.New(ring.DefaultConfig(), members)
	if err != nil {
		t.Fatal(err)
	}
	clusters := map[string]*clusterv3.Cluster{}
	for _, c := range bs.GetStaticResources().GetClusters() {
		clusters[c.GetName()] = c
	}
	var hcm hcmv3.HttpConnectionManager
	if err := bs.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := hcm.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	owners := map[uint32]string{} // stage -> the node its cluster prefers
	for _, f := range hcm.GetHttpFilters() {
		var rl ratelimitv3.RateLimit
		if f.GetTypedConfig().MessageIs(&rl) {
			if err := f.GetTypedConfig().UnmarshalTo(&rl); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if err := rl.ValidateAll(); err != nil {
				t.Fatalf("%s: filter %s: %v", where, f.GetName(), err)
			}
		} else {
			continue
		}
		w := where + " filter " + f.GetName()
		if _, dup := owners[rl.GetStage()]; dup {
			t.Errorf("%s: a second filter of stage %d", w, rl.GetStage())
		}
		if !cfg.HasDomain(rl.GetDomain()) || rl.GetRateLimitService().GetTransportApiVersion().String() != "V3" {
			t.Errorf("%s: domain %q, transport %v", w, rl.GetDomain(), rl.GetRateLimitService().GetTransportApiVersion())
		}
		name := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName()
		c := clusters[name]
		if c == nil {
			t.Fatalf("%s: no cluster %q", w, name)
		}
		if _, ok := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]; !ok {
			t.Errorf("%s: cluster %s has no HTTP/2 options: gRPC needs them", w, name)
		}
		if hc := c.GetHealthChecks(); len(hc) == 0 || hc[0].GetGrpcHealthCheck().GetServiceName() != "envoy.service.ratelimit.v3.RateLimitService" {
			t.Errorf("%s: cluster %s is not health checked on the RLS's service name", w, name)
		}
		hosts := endpointHosts(c)
		if rl.GetStage() == 0 {
			if !slices.Equal(hosts[0], nodes) || len(hosts) != 1 || c.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN {
				t.Errorf("%s: stage 0's cluster %s: %v %v, want every node %v round robin", w, name, hosts, c.GetLbPolicy(), nodes)
			}
			owners[0] = ""
			continue
		}
		if len(hosts[0]) != 1 || len(hosts) != 2 || !slices.Equal(slices.Sorted(slices.Values(append(hosts[1], hosts[0]...))), nodes) {
			t.Errorf("%s: cluster %s: %v, want one node at priority 0 and the others at priority 1", w, name, hosts)
			continue
		}
		owners[rl.GetStage()] = hosts[0][0]
	}
	if _, ok := owners[0]; !ok || len(owners) < 2 {
		t.Fatalf("%s: filters of stages %v, want stage 0 and at least one owner's", where, owners)
	}

	staged := 0
	for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			for _, l := range r.GetRoute().GetRateLimits() {
				w := where + " route " + r.GetMatch().GetPrefix()
				stage := l.GetStage().GetValue()
				owner, ok := owners[stage]
				switch {
				case !ok:
					t.Errorf("%s: a rate limit of stage %d, which no filter has", w, stage)
					continue
				case stage == 0:
					continue
				}
				staged++
				ds := fixedDescriptor(t, w, l)
				m, _ := rls.Lookup(cfg, "edge", ds)
				if m.Rule == nil || m.Rule.Unlimited {
					t.Errorf("%s: %v matches no limited rule", w, ds)
					continue
				}
				key := rls.CounterKey("edge", ds, m.Shared)
				got, _ := rg.Owner(identity.Inline(uint8(bucket.FixedWindowHits), m.Rule.Unit.Period(), key))
				if got.Name != owner {
					t.Errorf("%s: counter %s (%v) owned by %s in deploy/compose's cluster, but stage %d's cluster prefers %s",
						w, key, m.Rule.Unit.Period(), got.Name, stage, owner)
				}
			}
		}
	}
	if staged == 0 {
		t.Errorf("%s: no rate limit at an owner's stage", where)
	}
}

// fixedDescriptor is the descriptor of a rate limit whose actions take
// nothing from the request (generic_key only, as the doc's), the same for
// two different requests.
func fixedDescriptor(t *testing.T, where string, l *routev3.RateLimit) []rls.KV {
	t.Helper()
	for _, a := range l.GetActions() {
		if a.GetGenericKey() == nil {
			t.Fatalf("%s: action %v takes its value from the request: the owner of its counter is not fixed", where, a)
		}
	}
	a := descriptors(t, []*routev3.RateLimit{l}, request{method: "GET", path: "/search", remote: "203.0.113.7"})
	b := descriptors(t, []*routev3.RateLimit{l}, request{method: "POST", path: "/search/x", remote: "198.51.100.1",
		headers: map[string]string{"x-api-key": "k2", "x-tenant": "t2"}})
	if len(a) != 1 || len(b) != 1 || !slices.Equal(a[0], b[0]) {
		t.Fatalf("%s: descriptors %v and %v of two requests: not fixed", where, a, b)
	}
	return a[0]
}
