package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3" // types of the Anys
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rl/sluice/rls"
)

const envoyDoc = "../docs/envoy.md"

// yamlBlock is one ```yaml fence of a Markdown file, dedented.
type yamlBlock struct {
	line int // of the fence
	text string
}

// yamlBlocks returns the file's ```yaml blocks, indented ones (in lists)
// included.
func yamlBlocks(t *testing.T, path string) []yamlBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []yamlBlock
	var cur *yamlBlock
	indent := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && trimmed == "```yaml":
			cur, indent = &yamlBlock{line: n}, line[:len(line)-len(trimmed)]
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed ```yaml block", path, cur.line)
	}
	return out
}

// yamlDocs decodes every document of a block.
func yamlDocs(text string) ([]doc, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var out []doc
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, doc(m))
	}
}

// toProto converts a decoded YAML value to a proto message as Envoy reads
// its YAML (through JSON), refusing unknown fields, and validates it with
// its protoc-gen-validate rules.
func toProto(t *testing.T, where string, v any, m proto.Message) {
	t.Helper()
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := protojson.Unmarshal(j, m); err != nil {
		t.Fatalf("%s: not a %s: %v", where, m.ProtoReflect().Descriptor().FullName(), err)
	}
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			t.Fatalf("%s: invalid %s: %v", where, m.ProtoReflect().Descriptor().FullName(), err)
		}
	}
}

// rateLimitFilter checks an envoy.filters.http.ratelimit HTTP filter and
// returns its config (an Any's content is validated on its own: PGV does
// not look into Anys).
func rateLimitFilter(t *testing.T, where string, f *hcmv3.HttpFilter) *ratelimitv3.RateLimit {
	t.Helper()
	if f.GetName() != "envoy.filters.http.ratelimit" {
		t.Fatalf("%s: filter %q, want envoy.filters.http.ratelimit", where, f.GetName())
	}
	var rl ratelimitv3.RateLimit
	if err := f.GetTypedConfig().UnmarshalTo(&rl); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := rl.ValidateAll(); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if rl.GetDomain() != "edge" || rl.GetRateLimitService().GetTransportApiVersion().String() != "V3" {
		t.Errorf("%s: domain %q, transport %v; want edge, V3", where, rl.GetDomain(), rl.GetRateLimitService().GetTransportApiVersion())
	}
	return &rl
}

func rateLimits(t *testing.T, where string, v any) []*routev3.RateLimit {
	t.Helper()
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		t.Fatalf("%s: rate_limits: %T, want a list", where, v)
	}
	var out []*routev3.RateLimit
	for _, e := range list {
		var rl routev3.RateLimit
		toProto(t, where, e, &rl)
		out = append(out, &rl)
	}
	return out
}

// TestEnvoyDoc parses every YAML block of docs/envoy.md and checks each by
// what it is, and that none is missing.
func TestEnvoyDoc(t *testing.T) {
	rules, err := os.ReadFile("compose/rls/edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rls.Parse([]rls.File{{Name: "edge.yaml", Data: rules}}, rls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, b := range yamlBlocks(t, envoyDoc) {
		docs, err := yamlDocs(b.text)
		if err != nil {
			t.Errorf("%s:%d: %v", envoyDoc, b.line, err)
			continue
		}
		for i, d := range docs {
			where := envoyDoc + ":" + strconv.Itoa(b.line) + " document " + strconv.Itoa(i)
			kind, _ := d.get("kind").(string)
			switch {
			case d.get("static_resources") != nil:
				var bs bootstrapv3.Bootstrap
				toProto(t, where, map[string]any(d), &bs)
				if bs.GetStaticResources().GetListeners()[0].GetName() == ownerListener {
					seen["owner bootstrap"]++
					checkOwnerBootstrap(t, where, &bs, cfg)
					continue
				}
				seen["bootstrap"]++
				checkBootstrap(t, where, &bs, cfg)
			case d.get("domain") != nil:
				seen["rules"]++
				if b.text != string(rules) {
					t.Errorf("%s: the rules differ from deploy/compose/rls/edge.yaml: keep them one file", where)
				}
			case kind == "EnvoyFilter":
				seen[kind]++
				checkEnvoyFilter(t, where, d, cfg)
			case kind == "EnvoyPatchPolicy":
				seen[kind]++
				checkPatchPolicy(t, where, d)
			case kind == "BackendTrafficPolicy":
				seen[kind]++
				want(t, d, "apiVersion", "gateway.envoyproxy.io/v1alpha1")
				want(t, d, "spec.rateLimit.type", "Global")
				if _, ok := d.get("spec.rateLimit.global.rules.0.limit.requests").(int); !ok {
					t.Errorf("%s: no rateLimit.global.rules[0].limit.requests", where)
				}
			case kind == "ConfigMap" && d.get("metadata.name") == "envoy-gateway-config":
				data, _ := d.get("data").(map[string]any)
				text, _ := data["envoy-gateway.yaml"].(string)
				eg, err := yamlDocs(text)
				if err != nil || len(eg) != 1 {
					t.Fatalf("%s: envoy-gateway.yaml: %v", where, err)
				}
				want(t, eg[0], "kind", "EnvoyGateway")
				if eg[0].get("rateLimit") != nil {
					seen["EnvoyGateway drop-in"]++
					checkDropIn(t, where, eg[0])
					continue
				}
				seen["EnvoyGateway"]++
				want(t, eg[0], "extensionApis.enableEnvoyPatchPolicy", true)
			default:
				t.Errorf("%s: a YAML block this test does not know how to check", where)
			}
		}
	}
	for k, n := range map[string]int{"bootstrap": 1, "owner bootstrap": 1, "rules": 1, "EnvoyFilter": 2, "EnvoyPatchPolicy": 1, "BackendTrafficPolicy": 1, "EnvoyGateway": 1, "EnvoyGateway drop-in": 1} {
		if seen[k] != n {
			t.Errorf("%d %s blocks in %s, want %d", seen[k], k, envoyDoc, n)
		}
	}
}

// checkDropIn checks the EnvoyGateway configuration that runs Sluice as
// envoy-ratelimit: the Redis backend Envoy Gateway requires, Sluice's
// image, and a patch of the envoy-ratelimit container that runs
// `sluice serve` with the TLS flags on Envoy Gateway's /certs (a flag that
// `sluice serve` does not have would stop it) and probes /readyz.
func checkDropIn(t *testing.T, where string, eg doc) {
	t.Helper()
	want(t, eg, "rateLimit.backend.type", "Redis")
	want(t, eg, "provider.kubernetes.rateLimitDeployment.patch.type", "StrategicMerge")
	if img, _ := eg.get("provider.kubernetes.rateLimitDeployment.container.image").(string); !strings.Contains(img, "sluice") {
		t.Errorf("%s: rateLimitDeployment.container.image %q is not Sluice's", where, img)
	}
	cm, _ := eg.get("provider.kubernetes.rateLimitDeployment.patch.value.spec.template.spec.containers.0").(map[string]any)
	c := doc(cm)
	want(t, c, "name", "envoy-ratelimit")
	want(t, c, "command.0", "/sluice")
	want(t, c, "readinessProbe.httpGet.path", "/readyz")
	want(t, c, "readinessProbe.httpGet.port", 8080)
	args, _ := c.get("args").([]any)
	flags := map[string]string{}
	for i, a := range args {
		s, _ := a.(string)
		if i == 0 {
			if s != "serve" {
				t.Errorf("%s: args[0] = %q, want serve", where, s)
			}
			continue
		}
		k, v, _ := strings.Cut(strings.TrimPrefix(s, "--"), "=")
		flags[k] = v
	}
	for k, v := range map[string]string{"tls-cert-file": "/certs/tls.crt", "tls-key-file": "/certs/tls.key", "tls-client-ca-file": "/certs/ca.crt"} {
		if flags[k] != v {
			t.Errorf("%s: --%s=%q, want %q (Envoy Gateway's certificates)", where, k, flags[k], v)
		}
	}
}

func checkEnvoyFilter(t *testing.T, where string, d doc, cfg *rls.Config) {
	t.Helper()
	patches, _ := d.get("spec.configPatches").([]any)
	for i, p := range patches {
		pd := doc(p.(map[string]any))
		w := where + " configPatches[" + strconv.Itoa(i) + "]"
		switch pd.get("applyTo") {
		case "HTTP_FILTER":
			want(t, pd, "patch.operation", "INSERT_BEFORE")
			want(t, pd, "match.listener.filterChain.filter.subFilter.name", "envoy.filters.http.router")
			var f hcmv3.HttpFilter
			toProto(t, w, pd.get("patch.value"), &f)
			rl := rateLimitFilter(t, w, &f)
			if c := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(); c != "outbound|8081||sluice.sluice.svc.cluster.local" {
				t.Errorf("%s: cluster %q, want Istio's name of the sluice Service's port 8081", w, c)
			}
		case "VIRTUAL_HOST":
			want(t, pd, "patch.operation", "MERGE")
			rls := rateLimits(t, w, pd.get("patch.value.rate_limits"))
			got := descriptors(t, rls, request{method: "POST", path: "/login", remote: "203.0.113.7"})
			checkRules(t, w, cfg, got, []string{
				"[(remote_address, 203.0.113.7)] edge.remote_address 600/MINUTE",
				"[(login, post), (remote_address, 203.0.113.7)] edge.login_post.remote_address 5/MINUTE",
			})
		default:
			t.Errorf("%s: applyTo %v", w, pd.get("applyTo"))
		}
	}
}

func checkPatchPolicy(t *testing.T, where string, d doc) {
	t.Helper()
	want(t, d, "spec.type", "JSONPatch")
	want(t, d, "spec.targetRef.kind", "Gateway")
	patches, _ := d.get("spec.jsonPatches").([]any)
	kinds := map[string]bool{}
	for i, p := range patches {
		pd := doc(p.(map[string]any))
		w := where + " jsonPatches[" + strconv.Itoa(i) + "]"
		typ, _ := pd.get("type").(string)
		path, _ := pd.get("operation.path").(string)
		want(t, pd, "operation.op", "add")
		value := pd.get("operation.value")
		switch {
		case typ == "type.googleapis.com/envoy.config.cluster.v3.Cluster" && path == "":
			var c clusterv3.Cluster
			toProto(t, w, value, &c)
			if c.GetName() != pd.get("name") {
				t.Errorf("%s: cluster %q added under the name %v", w, c.GetName(), pd.get("name"))
			}
			kinds["cluster"] = true
		case typ == "type.googleapis.com/envoy.config.listener.v3.Listener" && strings.HasSuffix(path, "/typed_config/http_filters/0"):
			var f hcmv3.HttpFilter
			toProto(t, w, value, &f)
			rl := rateLimitFilter(t, w, &f)
			if c := rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName(); c != "sluice_rls" {
				t.Errorf("%s: cluster %q, want the added sluice_rls", w, c)
			}
			kinds["filter"] = true
		case typ == "type.googleapis.com/envoy.config.route.v3.RouteConfiguration" && strings.HasSuffix(path, "/rate_limits"):
			rateLimits(t, w, value)
			kinds["rate_limits"] = true
		default:
			t.Errorf("%s: a patch of %s at %q this test does not check", w, typ, path)
		}
	}
	if len(kinds) != 3 {
		t.Errorf("%s: patches %v, want a cluster, the filter and rate_limits", where, kinds)
	}
}
