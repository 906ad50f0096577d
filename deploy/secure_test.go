package deploy

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// serveFlags lists the flags of `sluice serve -h`, from the binary built
// from this tree.
func serveFlags(t *testing.T) map[string]bool {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not in PATH: %v", err)
	}
	out, err := exec.Command(gobin, "run", "../cmd/sluice", "serve", "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("sluice serve -h: %v\n%s", err, out)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["gossip-key-file"] || !flags["grpc-addr"] {
		t.Fatalf("could not read the flags of sluice serve -h:\n%s", out)
	}
	return flags
}

// loadAll parses every document of a multi-document YAML file, by
// "Kind/name".
func loadAll(t *testing.T, path string) map[string]doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]doc{}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		d := doc(m)
		kind, _ := d.get("kind").(string)
		name, _ := d.get("metadata.name").(string)
		out[kind+"/"+name] = d
	}
}

// list returns the list at path, as docs.
func (d doc) list(path string) []doc {
	l, _ := d.get(path).([]any)
	out := make([]doc, 0, len(l))
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			out = append(out, doc(m))
		}
	}
	return out
}

// strs returns the string list at path.
func (d doc) strs(path string) []string {
	l, _ := d.get(path).([]any)
	var out []string
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestSecureOverlay checks deploy/kubernetes-secure: the cert-manager CA
// chain, the server and peer certificates, the StatefulSet patch that wires
// their Secrets and the gossip key into `sluice serve` flags, and the
// NetworkPolicy that fences the peer and gossip ports.
func TestSecureOverlay(t *testing.T) {
	const dir = "kubernetes-secure"
	k := load(t, filepath.Join(dir, "kustomization.yaml"))
	res := k.strs("resources")
	if !slices.Contains(res, "../kubernetes") {
		t.Fatalf("resources %v: the overlay must build on ../kubernetes", res)
	}
	all := map[string]doc{}
	for _, r := range res[1:] {
		for name, d := range loadAll(t, filepath.Join(dir, r)) {
			all[name] = d
		}
	}

	// The issuer chain: self-signed -> CA certificate -> CA issuer.
	if all["Issuer/sluice-selfsigned"].get("spec.selfSigned") == nil {
		t.Error("Issuer sluice-selfsigned is not selfSigned")
	}
	ca := all["Certificate/sluice-ca"]
	want(t, ca, "spec.isCA", true)
	want(t, ca, "spec.issuerRef.name", "sluice-selfsigned")
	want(t, all["Issuer/sluice-ca"], "spec.ca.secretName", ca.get("spec.secretName"))
	secrets := map[string]doc{} // Secret name -> the Certificate writing it
	for _, name := range []string{"sluice-server", "sluice-peer", "sluice-client"} {
		c := all["Certificate/"+name]
		if c == nil {
			t.Fatalf("no Certificate %s", name)
		}
		want(t, c, "spec.issuerRef.name", "sluice-ca")
		want(t, c, "spec.issuerRef.kind", "Issuer")
		secrets[c.get("spec.secretName").(string)] = c
	}
	peer := all["Certificate/sluice-peer"]
	if !slices.Contains(peer.strs("spec.dnsNames"), "sluice-peer") {
		t.Errorf("the peer certificate's dnsNames %v lack sluice-peer", peer.strs("spec.dnsNames"))
	}
	for _, u := range []string{"server auth", "client auth"} {
		if !slices.Contains(peer.strs("spec.usages"), u) {
			t.Errorf("the peer certificate's usages %v lack %q: it is served and presented", peer.strs("spec.usages"), u)
		}
	}
	// Public mTLS is on: callers get certificates like sluice-client,
	// for client auth, never with the peer's name.
	cl := all["Certificate/sluice-client"]
	if !slices.Contains(cl.strs("spec.usages"), "client auth") {
		t.Errorf("the client certificate's usages %v lack \"client auth\"", cl.strs("spec.usages"))
	}
	if slices.Contains(cl.strs("spec.dnsNames"), "sluice-peer") {
		t.Error("the client certificate carries the peer name sluice-peer: it would be admitted as a node")
	}
	if !slices.Contains(all["Certificate/sluice-server"].strs("spec.dnsNames"), "sluice") {
		t.Error("the server certificate does not name the Service sluice")
	}

	// No key file is committed: the base's cluster secret keys the gossip.
	if len(k.list("secretGenerator")) != 0 {
		t.Error("the overlay generates a Secret: the cluster secret, created by the user, is the only one it needs")
	}

	// The StatefulSet patch: every SLUICE_* variable is a serve flag, and
	// every file it names is in a Secret volume that holds it.
	patches := k.list("patches")
	var sts doc
	for _, p := range patches {
		if d := load(t, filepath.Join(dir, p.get("path").(string))); d.get("kind") == "StatefulSet" {
			sts = d
		}
	}
	if sts == nil {
		t.Fatal("no StatefulSet patch")
	}
	want(t, sts, "metadata.name", "sluice")
	want(t, sts, "spec.template.spec.securityContext.fsGroup", 65532)
	c := sts.list("spec.template.spec.containers")[0]
	want(t, c, "name", "sluice")
	// The base's topology spread, memory limit and GOMEMLIMIT reach the
	// overlay unchanged (checkPodSpec checks them in the base): the
	// strategic merge would replace what the patch set of them.
	if sts.get("spec.template.spec.topologySpreadConstraints") != nil || c.get("resources") != nil {
		t.Error("the StatefulSet patch sets topologySpreadConstraints or resources: the base's are the ones to keep")
	}
	for _, e := range c.list("env") {
		if e.get("name") == "GOMEMLIMIT" {
			t.Error("the StatefulSet patch sets GOMEMLIMIT: the base's, from limits.memory, is the one to keep")
		}
	}
	flags := serveFlags(t)
	mounts := map[string]string{} // mountPath -> volume
	// Entries with $patch (delete) take the base's cluster secret out.
	for _, m := range c.list("volumeMounts") {
		if m.get("$patch") != nil {
			continue
		}
		mounts[m.get("mountPath").(string)] = m.get("name").(string)
		want(t, m, "readOnly", true)
		if m.get("subPath") != nil {
			t.Errorf("volumeMount %v uses subPath: the kubelet would never update it", m)
		}
	}
	volumes := map[string]string{} // volume -> Secret
	for _, v := range sts.list("spec.template.spec.volumes") {
		if v.get("$patch") != nil {
			continue
		}
		volumes[v.get("name").(string)], _ = v.get("secret.secretName").(string)
	}
	env := map[string]string{}
	for _, e := range c.list("env") {
		if e.get("$patch") != nil {
			continue
		}
		name, value := e.get("name").(string), e.get("value").(string)
		env[name] = value
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, "SLUICE_"), "_", "-"))
		if !flags[flag] {
			t.Errorf("%s is not the twin of a `sluice serve` flag (--%s)", name, flag)
		}
		if !strings.HasSuffix(name, "_FILE") {
			continue
		}
		secret := volumes[mounts[filepath.Dir(value)]]
		file := filepath.Base(value)
		switch {
		case secret == "":
			t.Errorf("%s=%s is not in a mounted Secret", name, value)
		case secrets[secret] == nil:
			t.Errorf("%s=%s: Secret %s is written by no Certificate", name, value, secret)
		case !slices.Contains([]string{"tls.crt", "tls.key", "ca.crt"}, file):
			t.Errorf("%s=%s: cert-manager writes tls.crt, tls.key and ca.crt, not %s", name, value, file)
		}
	}
	wantFrom := map[string]string{ // variable -> the Secret it must come from
		"SLUICE_TLS_CERT_FILE":      "sluice-server-tls",
		"SLUICE_TLS_KEY_FILE":       "sluice-server-tls",
		"SLUICE_TLS_CLIENT_CA_FILE": "sluice-server-tls", // public mTLS on
		"SLUICE_PEER_TLS_CERT_FILE": "sluice-peer-tls",
		"SLUICE_PEER_TLS_KEY_FILE":  "sluice-peer-tls",
		"SLUICE_PEER_TLS_CA_FILE":   "sluice-peer-tls",
	}
	for name, secret := range wantFrom {
		if got := volumes[mounts[filepath.Dir(env[name])]]; got != secret {
			t.Errorf("%s=%q comes from Secret %q, want %q", name, env[name], got, secret)
		}
	}
	if env["SLUICE_PEER_ADDR"] != ":8082" {
		t.Errorf("SLUICE_PEER_ADDR = %q, want :8082", env["SLUICE_PEER_ADDR"])
	}
	want(t, c, "readinessProbe.httpGet.scheme", "HTTPS")
	want(t, c, "livenessProbe.httpGet.scheme", "HTTPS")

	// The NetworkPolicy: peers (the StatefulSet's pods) on 8082 and 7946
	// only; clients (anyone) on 8080 and 8081 only.
	np := all["NetworkPolicy/sluice"]
	if np == nil {
		t.Fatal("no NetworkPolicy sluice")
	}
	podLabels := load(t, "kubernetes/statefulset.yaml").get("spec.template.metadata.labels")
	if got := np.get("spec.podSelector.matchLabels"); !equalYAML(got, podLabels) {
		t.Errorf("the NetworkPolicy selects %v, the StatefulSet's pods are %v", got, podLabels)
	}
	if !slices.Equal(np.strs("spec.policyTypes"), []string{"Ingress"}) {
		t.Errorf("policyTypes = %v, want [Ingress]", np.strs("spec.policyTypes"))
	}
	rules := np.list("spec.ingress")
	if len(rules) != 2 {
		t.Fatalf("%d ingress rules, want 2 (peers, clients)", len(rules))
	}
	ports := func(r doc) []string {
		var out []string
		for _, p := range r.list("ports") {
			out = append(out, strings.TrimSpace(yamlString(p.get("port"))+"/"+yamlString(p.get("protocol"))))
		}
		slices.Sort(out)
		return out
	}
	peers, clients := rules[0], rules[1]
	if from := peers.list("from"); len(from) != 1 || !equalYAML(from[0].get("podSelector.matchLabels"), podLabels) || from[0].get("namespaceSelector") != nil {
		t.Errorf("the peer rule admits %v, want the StatefulSet's pods only", peers.get("from"))
	}
	if got := ports(peers); !slices.Equal(got, []string{"7946/TCP", "7946/UDP", "8082/TCP"}) {
		t.Errorf("peers are admitted on %v, want 7946/TCP, 7946/UDP, 8082/TCP", got)
	}
	if got := ports(clients); !slices.Equal(got, []string{"8080/TCP", "8081/TCP"}) {
		t.Errorf("clients are admitted on %v, want 8080/TCP, 8081/TCP", got)
	}
	if from := clients.list("from"); len(from) == 0 {
		t.Error("the client rule admits anyone: want the namespace's pods (or narrower)")
	}

	renderWithKubectl(t, dir)
}

// renderWithKubectl builds the overlay with `kubectl kustomize` when kubectl
// is installed (it needs no cluster), from a copy with a throwaway gossip
// key, and checks the StatefulSet carries the patch merged into the base.
func renderWithKubectl(t *testing.T, dir string) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not installed: the overlay's rendering is not checked")
		return
	}
	tmp := t.TempDir()
	for _, d := range []string{"kubernetes", dir} {
		if err := os.CopyFS(filepath.Join(tmp, d), os.DirFS(d)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(tmp, dir)).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	path := filepath.Join(tmp, "rendered.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	r := loadAll(t, path)
	sts := r["StatefulSet/sluice"]
	checkPodSpec(t, "the rendered "+dir, sts)
	c := sts.list("spec.template.spec.containers")[0]
	names := map[string]bool{}
	for _, e := range c.list("env") {
		names[e.get("name").(string)] = true
	}
	for _, n := range []string{"SLUICE_JOIN", "SLUICE_TLS_CERT_FILE", "SLUICE_PEER_TLS_CA_FILE", "SLUICE_CLUSTER_SECRET_FILE"} {
		if !names[n] {
			t.Errorf("the rendered StatefulSet lacks %s (base and patch not merged)", n)
		}
	}
	if len(sts.list("spec.template.spec.volumes")) < 5 {
		t.Errorf("the rendered StatefulSet has volumes %v, want the base's and the Secrets", sts.get("spec.template.spec.volumes"))
	}
	for _, kind := range []string{"NetworkPolicy/sluice", "Issuer/sluice-ca", "Certificate/sluice-peer"} {
		if r[kind] == nil {
			t.Errorf("the rendered overlay lacks %s", kind)
		}
	}
}

// equalYAML compares two parsed YAML values by their encoding.
func equalYAML(a, b any) bool { return yamlString(a) == yamlString(b) }

func yamlString(v any) string {
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}
