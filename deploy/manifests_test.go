// Package deploy holds the deployment files (Kubernetes manifests, a
// compose file, the Envoy rate limit rules they mount); its test checks them
// as far as this machine allows: they parse, and carry the fields a Sluice
// cluster needs, and the secure overlay (deploy/kubernetes-secure:
// cert-manager certificates, TLS and gossip key wiring, NetworkPolicy) names
// real `sluice serve` flags and Secrets that hold the files. It also checks the configuration blocks of docs/envoy.md:
// Envoy's in Envoy's protos (go-control-plane, validated), the rules with
// package rls, and that the example requests get the rules the page says.
// Nothing here claims they were applied to a Kubernetes cluster, an Istio
// mesh or an Envoy Gateway.
package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluice-rl/sluice/policy"
)

// doc is a parsed YAML document.
type doc map[string]any

// get walks a path of map keys and list indexes ("spec.ports.0.name").
func (d doc) get(path string) any {
	var cur any = map[string]any(d)
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			i := 0
			for _, r := range p {
				i = i*10 + int(r-'0')
			}
			if i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

func load(t *testing.T, path string) doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return doc(m)
}

func want(t *testing.T, d doc, path string, v any) {
	t.Helper()
	if got := d.get(path); got != v {
		t.Errorf("%s = %v, want %v", path, got, v)
	}
}

func TestKubernetesManifests(t *testing.T) {
	k := load(t, "kubernetes/kustomization.yaml")
	res, _ := k.get("resources").([]any)
	byKind := map[string]doc{}
	for _, r := range res {
		d := load(t, filepath.Join("kubernetes", r.(string)))
		kind, _ := d.get("kind").(string)
		name, _ := d.get("metadata.name").(string)
		byKind[kind+"/"+name] = d
	}

	gossip := byKind["Service/sluice-gossip"]
	if gossip == nil {
		t.Fatal("no headless Service sluice-gossip")
	}
	want(t, gossip, "spec.clusterIP", "None")
	want(t, gossip, "spec.publishNotReadyAddresses", true)

	svc := byKind["Service/sluice"]
	if svc == nil {
		t.Fatal("no client Service sluice")
	}
	want(t, svc, "spec.ports.0.port", 8081)

	sts := byKind["StatefulSet/sluice"]
	if sts == nil {
		t.Fatal("no StatefulSet sluice")
	}
	want(t, sts, "spec.podManagementPolicy", "Parallel")
	want(t, sts, "spec.serviceName", "sluice-gossip")
	c := doc(sts.get("spec.template.spec.containers.0").(map[string]any))
	want(t, c, "readinessProbe.httpGet.path", "/readyz")
	want(t, c, "livenessProbe.httpGet.path", "/healthz")
	if c.get("lifecycle.preStop") == nil {
		t.Error("no preStop hook")
	}
	grace, _ := sts.get("spec.template.spec.terminationGracePeriodSeconds").(int)
	pre, _ := c.get("lifecycle.preStop.sleep.seconds").(int)
	env := map[string]string{}
	for _, e := range c.get("env").([]any) {
		m := e.(map[string]any)
		if v, ok := m["value"].(string); ok {
			env[m["name"].(string)] = v
		}
	}
	checkPodSpec(t, "deploy/kubernetes", sts)
	if !strings.HasPrefix(env["SLUICE_JOIN"], "sluice-gossip:") {
		t.Errorf("SLUICE_JOIN = %q, want the headless Service's name", env["SLUICE_JOIN"])
	}
	// The data directory is the claim's mount (the root filesystem is
	// read-only), so that a stop of every pod keeps the counts.
	claim, _ := sts.get("spec.volumeClaimTemplates.0").(map[string]any)
	want(t, doc(claim), "metadata.name", "data")
	mounted := false
	for _, m := range c.list("volumeMounts") {
		mounted = mounted || m.get("name") == "data" && m.get("mountPath") == env["SLUICE_DATA_DIR"] && env["SLUICE_DATA_DIR"] != ""
	}
	if !mounted {
		t.Errorf("SLUICE_DATA_DIR %q is not the mount of the claim data", env["SLUICE_DATA_DIR"])
	}
	// One DNS seed: the default --bootstrap-expect would be 2; the group of
	// the ring's epochs is founded once all the initial replicas see each
	// other.
	if replicas, _ := sts.get("spec.replicas").(int); env["SLUICE_BOOTSTRAP_EXPECT"] != strconv.Itoa(replicas) {
		t.Errorf("SLUICE_BOOTSTRAP_EXPECT = %q, want the replicas, %d", env["SLUICE_BOOTSTRAP_EXPECT"], replicas)
	}
	shutdown, err := policy.ParseDuration(env["SLUICE_SHUTDOWN_TIMEOUT"])
	if err != nil || grace < pre+int(shutdown.Seconds()) {
		t.Errorf("terminationGracePeriodSeconds %d < preStop %ds + shutdown timeout %s: handoff may be cut", grace, pre, shutdown)
	}

	// The peer service has a port of its own, advertised, reachable
	// between pods through the headless Service and not through the
	// client Service.
	if !strings.HasSuffix(env["SLUICE_PEER_ADVERTISE_ADDR"], ":8082") {
		t.Errorf("SLUICE_PEER_ADVERTISE_ADDR = %q, want the pod's :8082", env["SLUICE_PEER_ADVERTISE_ADDR"])
	}
	hasPort := func(ports any, name string, port int) bool {
		list, _ := ports.([]any)
		for _, p := range list {
			m, _ := p.(map[string]any)
			if m["name"] == name && (m["port"] == port || m["containerPort"] == port) {
				return true
			}
		}
		return false
	}
	if !hasPort(c.get("ports"), "peer", 8082) {
		t.Error("the container has no port peer 8082")
	}
	if !hasPort(gossip.get("spec.ports"), "peer", 8082) {
		t.Error("the headless Service has no port peer 8082")
	}
	for _, p := range svc.get("spec.ports").([]any) {
		if m, _ := p.(map[string]any); m["port"] == 8082 || m["targetPort"] == "peer" {
			t.Error("the client Service exposes the peer port")
		}
	}

	pdb := byKind["PodDisruptionBudget/sluice"]
	if pdb == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	want(t, pdb, "spec.maxUnavailable", 1)

	cm := byKind["ConfigMap/sluice-policies"]
	if cm == nil {
		t.Fatal("no ConfigMap of policies")
	}
	data, _ := cm.get("data").(map[string]any)
	text, _ := data["policies.yaml"].(string)
	set, err := policy.Parse([]byte(text))
	if err != nil || set.Len() == 0 {
		t.Fatalf("ConfigMap policies: %v (%d policies)", err, set.Len())
	}
}

// checkPodSpec checks what every StatefulSet of Sluice's needs in its pod
// template: GOMEMLIMIT at 90% of the container's memory limit (the store's
// memory cap derives from it), requests equal to limits (Guaranteed), the
// secure defaults (seccomp RuntimeDefault, no service-account token, the
// cluster secret from a mounted Secret), and topology spread over zones and
// machines, honouring taints, that selects the StatefulSet's own pods.
func checkPodSpec(t *testing.T, what string, sts doc) {
	t.Helper()
	c := doc(sts.get("spec.template.spec.containers.0").(map[string]any))
	env := map[string]string{}
	for _, e := range c.list("env") {
		env[e.get("name").(string)], _ = e.get("value").(string)
	}
	limit, err := memoryBytes(fmt.Sprint(c.get("resources.limits.memory")))
	if err != nil {
		t.Errorf("%s: resources.limits.memory: %v", what, err)
	} else if want := fmt.Sprintf("%dMiB", limit*90/100/(1<<20)); env["GOMEMLIMIT"] != want {
		t.Errorf("%s: GOMEMLIMIT %q, want %q: 90%% of limits.memory %v", what, env["GOMEMLIMIT"], want, c.get("resources.limits.memory"))
	}
	for _, r := range []string{"cpu", "memory"} {
		req, lim := c.get("resources.requests."+r), c.get("resources.limits."+r)
		if req == nil || fmt.Sprint(req) != fmt.Sprint(lim) {
			t.Errorf("%s: %s request %v, limit %v: want them equal (Guaranteed)", what, r, req, lim)
		}
	}
	spec := doc(sts.get("spec.template.spec").(map[string]any))
	want(t, spec, "automountServiceAccountToken", false)
	want(t, spec, "securityContext.seccompProfile.type", "RuntimeDefault")
	want(t, spec, "securityContext.runAsNonRoot", true)
	want(t, c, "securityContext.seccompProfile.type", "RuntimeDefault")
	want(t, c, "securityContext.allowPrivilegeEscalation", false)
	want(t, c, "securityContext.readOnlyRootFilesystem", true)
	if !slices.Equal(c.strs("securityContext.capabilities.drop"), []string{"ALL"}) {
		t.Errorf("%s: capabilities.drop %v, want [ALL]", what, c.get("securityContext.capabilities.drop"))
	}
	// The cluster secret: a file of the Secret sluice-cluster-secret,
	// mounted as a directory.
	secretOf := map[string]string{}
	for _, v := range spec.list("volumes") {
		secretOf[v.get("name").(string)], _ = v.get("secret.secretName").(string)
	}
	mounted := ""
	for _, m := range c.list("volumeMounts") {
		if m.get("mountPath") == filepath.Dir(env["SLUICE_CLUSTER_SECRET_FILE"]) && m.get("subPath") == nil {
			mounted = secretOf[m.get("name").(string)]
		}
	}
	if mounted != "sluice-cluster-secret" {
		t.Errorf("%s: SLUICE_CLUSTER_SECRET_FILE=%q is not in the mounted Secret sluice-cluster-secret", what, env["SLUICE_CLUSTER_SECRET_FILE"])
	}
	podLabels := sts.get("spec.template.metadata.labels")
	keys := map[string]string{}
	for _, tsc := range sts.list("spec.template.spec.topologySpreadConstraints") {
		key, _ := tsc.get("topologyKey").(string)
		keys[key], _ = tsc.get("whenUnsatisfiable").(string)
		if tsc.get("nodeTaintsPolicy") != "Honor" {
			t.Errorf("%s: topology spread over %s: nodeTaintsPolicy %v, want Honor", what, key, tsc.get("nodeTaintsPolicy"))
		}
		if skew, _ := tsc.get("maxSkew").(int); skew != 1 {
			t.Errorf("%s: topology spread over %s: maxSkew %v, want 1", what, key, tsc.get("maxSkew"))
		}
		sel, _ := tsc.get("labelSelector.matchLabels").(map[string]any)
		labels, _ := podLabels.(map[string]any)
		if len(sel) == 0 {
			t.Errorf("%s: topology spread over %s selects no pods", what, key)
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("%s: topology spread over %s selects %v, the pods are %v", what, key, sel, podLabels)
			}
		}
	}
	// Zones: best effort (a cluster without zone labels still schedules);
	// machines: enforced.
	if keys["topology.kubernetes.io/zone"] != "ScheduleAnyway" {
		t.Errorf("%s: no topology spread over zones (ScheduleAnyway): %v", what, keys)
	}
	if keys["kubernetes.io/hostname"] != "DoNotSchedule" {
		t.Errorf("%s: no topology spread over machines (DoNotSchedule): %v", what, keys)
	}
}

func TestComposeFile(t *testing.T) {
	d := load(t, "compose/compose.yaml")
	services, ok := d.get("services").(map[string]any)
	if !ok || len(services) != 3 {
		t.Fatalf("services: %T %v, want 3", d.get("services"), d.get("services"))
	}
	for name := range services {
		s := doc(services[name].(map[string]any))
		want(t, s, "image", "sluice:dev")
		want(t, s, "environment.SLUICE_NODE_NAME", name)
		if j, _ := s.get("environment.SLUICE_JOIN").(string); !strings.Contains(j, "sluice-0:7946") {
			t.Errorf("%s: SLUICE_JOIN = %q", name, j)
		}
	}
}

// memoryBytes reads a memory quantity as the manifests write it: a whole
// number with an optional binary unit (2Gi, 1536Mi).
func memoryBytes(q string) (int64, error) {
	units := map[string]int64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
	n := strings.TrimRight(q, "KMGTi")
	u, ok := units[q[len(n):]]
	v, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil {
		return 0, fmt.Errorf("%q: want a whole number with Ki, Mi, Gi or Ti", q)
	}
	return v * u, nil
}
