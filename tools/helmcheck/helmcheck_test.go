package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const chartDir = "../../deploy/helm/sluice"

func TestMain(m *testing.M) {
	quietHelm()
	os.Exit(m.Run())
}

func TestChartPasses(t *testing.T) {
	sets, err := valueSets(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, vs := range sets {
		names[vs.name] = true
	}
	for _, want := range []string{"default values", "all-on-values.yaml", "cert-manager-values.yaml", "insecure-values.yaml", "no-persistence-values.yaml"} {
		if !names[want] {
			t.Fatalf("value sets %v: want %s", names, want)
		}
	}
	for _, vs := range sets {
		if p := checkChart(chartDir, vs, nil, false); len(p) > 0 {
			t.Errorf("%s:\n%s", vs.name, strings.Join(p, "\n"))
		}
	}
	// An explicit store cap is passed as it is.
	vs := valueSet{name: "store.maxBytes", release: "sluice", values: map[string]any{"store": map[string]any{"maxBytes": "768MiB"}}}
	if p := checkChart(chartDir, vs, nil, false); len(p) > 0 {
		t.Errorf("%s:\n%s", vs.name, strings.Join(p, "\n"))
	}
}

// TestValuesRefused: values the templates refuse fail the render, naming
// the value.
func TestValuesRefused(t *testing.T) {
	cases := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"a fractional memory limit", map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1.5Gi"}}}, `resources.limits.memory "1.5Gi"`},
		{"an empty memory limit", map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": ""}}}, "resources.limits.memory is required"},
		{"a store share of 100%", map[string]any{"store": map[string]any{"memoryPercent": 100}}, "store.memoryPercent"},
		{"a grace period shorter than the shutdown", map[string]any{"terminationGracePeriodSeconds": 10}, "terminationGracePeriodSeconds"},
		{"insecure with a cluster secret", map[string]any{"insecure": true, "clusterSecret": map[string]any{"existingSecret": "s"}}, "insecure: true with clusterSecret.existingSecret"},
		{"insecure with peer TLS", map[string]any{"insecure": true, "peerTLS": map[string]any{"existingSecret": "p"}}, "insecure: true with clusterSecret.existingSecret or peerTLS"},
		{"TLS without peer TLS", map[string]any{"tls": map[string]any{"existingSecret": "s"}}, "tls without peerTLS"},
		{"two sources of the certificate", map[string]any{"tls": map[string]any{"existingSecret": "s", "certManager": map[string]any{"enabled": true}}}, "tls.certManager.enabled and tls.existingSecret"},
		{"cert-manager without an issuer", map[string]any{"peerTLS": map[string]any{"certManager": map[string]any{"enabled": true}}}, "peerTLS.certManager.issuerRef.name is required"},
		{"client certificates without TLS", map[string]any{"tls": map[string]any{"requireClientCert": true}}, "tls.requireClientCert without"},
		{"a peer name that is no DNS name", map[string]any{"peerTLS": map[string]any{"name": "Sluice Peer"}}, "peerTLS.name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := checkChart(chartDir, valueSet{name: c.name, release: "sluice", values: c.values}, nil, false)
			if !strings.Contains(strings.Join(p, "\n"), c.want) {
				t.Errorf("problems %q, want one naming %q", p, c.want)
			}
		})
	}
}

// TestChecksCatch breaks a copy of the chart in the ways the checks are
// for, and expects each to be reported.
func TestChecksCatch(t *testing.T) {
	cases := []struct {
		name, file, old, new, want string
	}{
		{"no GOMEMLIMIT", "templates/statefulset.yaml", "- {name: GOMEMLIMIT,", "- {name: GOMEMLIMIT_OFF,", "GOMEMLIMIT \"\", want"},
		{"GOMEMLIMIT at the whole limit", "templates/statefulset.yaml", `{{ include "sluice.goMemLimit" . | quote }}`, `"3072MiB"`, "GOMEMLIMIT \"3072MiB\", want \"2764MiB\""},
		{"no seccomp profile", "values.yaml", "  seccompProfile: {type: RuntimeDefault}\n", "", "restricted Pod Security Standard"},
		{"privilege escalation", "values.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation != false"},
		{"the service-account token", "values.yaml", "automountServiceAccountToken: false", "automountServiceAccountToken: true", "automountServiceAccountToken is not false"},
		{"requests below limits", "templates/statefulset.yaml", "{{- toYaml .Values.resources | nindent 12 }}", "requests: {cpu: 500m, memory: 256Mi}\n            limits: {cpu: 500m, memory: 3Gi}", "not Guaranteed"},
		{"taints ignored by the spread", "templates/statefulset.yaml", "nodeTaintsPolicy: {{ .Values.topologySpread.nodeTaintsPolicy }}", "nodeTaintsPolicy: Ignore", "nodeTaintsPolicy is not Honor"},
		{"no cluster secret", "templates/statefulset.yaml", "- {name: SLUICE_CLUSTER_SECRET_FILE,", "- {name: SLUICE_CLUSTER_SECRET,", "no SLUICE_CLUSTER_SECRET_FILE"},
		{"a short cluster secret", "templates/secret-cluster.yaml", "randAlphaNum 48", "randAlphaNum 16", "want at least 32"},
		{"a cluster secret outside its Secret", "templates/statefulset.yaml", "mountPath: /etc/sluice/cluster,", "mountPath: /etc/sluice/clusterx,", "SLUICE_CLUSTER_SECRET_FILE=/etc/sluice/cluster/cluster-secret is not in a mounted Secret"},
		{"a subPath mount", "templates/statefulset.yaml", "mountPath: /etc/sluice/cluster,", "mountPath: /etc/sluice/cluster, subPath: cluster-secret,", "subPath"},
		{"no NetworkPolicy by default", "values.yaml", "networkPolicy:\n  enabled: true", "networkPolicy:\n  enabled: false", "NetworkPolicy is off in the chart's defaults"},
		{"insecure by default", "values.yaml", "insecure: false", "insecure: true", "insecure in the chart's defaults"},
		{"the API ports open to all", "templates/networkpolicy.yaml", "      from:\n        {{- with .Values.networkPolicy.clientFrom }}\n        {{- toYaml . | nindent 8 }}\n        {{- else }}\n        - podSelector: {}\n        {{- end }}\n", "", "admits anyone on port 808"},
		{"a peer certificate without the peer name", "templates/certificates.yaml", "dnsNames: [{{ .Values.peerTLS.name }}]", "dnsNames: [sluice-client]", "lack the peer name"},
		{"a peer certificate for servers only", "templates/certificates.yaml", "usages: [server auth, client auth,", "usages: [server auth,", "lack \"client auth\""},
		{"HTTP probes with TLS", "templates/statefulset.yaml", "port: http{{ if $tls }}, scheme: HTTPS{{ end }}}", "port: http}", "probes' scheme"},
		{"no Certificate for the server Secret", "templates/certificates.yaml", "secretName: {{ $fullname }}-server-tls", "secretName: {{ $fullname }}-other-tls", "no Certificate writes Secret"},
		{"no spread over machines", "templates/statefulset.yaml", "topologyKey: kubernetes.io/hostname", "topologyKey: example.com/rack", "kubernetes.io/hostname"},
		{"a store cap not from the limit", "templates/statefulset.yaml", `{{ include "sluice.storeMaxBytes" . | quote }}`, `"1GiB"`, "SLUICE_STORE_MAX_BYTES"},
		{"no PDB", "templates/pdb.yaml", "{{- if .Values.podDisruptionBudget.enabled }}", "{{- if false }}", "PodDisruptionBudget"},
		{"a misspelled field", "templates/statefulset.yaml", "podManagementPolicy: Parallel", "podManagementPolicy: Parallel\n  revisionHistoryLimitt: 3", "unknown field"},
		{"the peer port on the client Service", "templates/service.yaml", "- {name: http, port: 8080", "- {name: peer, port: 8082, targetPort: peer}\n    - {name: http, port: 8080", "exposes the peer port"},
		{"a join address elsewhere", "templates/statefulset.yaml", `-gossip:7946"}`, `:7946"}`, "SLUICE_JOIN"},
		{"a NetworkPolicy open to all on the peer port", "templates/networkpolicy.yaml", "- {port: 8081, protocol: TCP}", "- {port: 8081, protocol: TCP}\n        - {port: 8082, protocol: TCP}", "more than the nodes on port 8082"},
		{"a checksum restart", "templates/statefulset.yaml", "      {{- with .Values.podAnnotations }}\n      annotations:\n",
			"      annotations:\n        checksum/policies: {{ .Values.policies | sha256sum }}\n      {{- with .Values.podAnnotations }}\n", "checksum/policies"},
		{"no persistence by default", "values.yaml", "persistence:\n  enabled: true", "persistence:\n  enabled: false", "persistence is off in the chart's defaults"},
		{"the data dir not on the volume", "templates/statefulset.yaml", "- {name: data, mountPath: /var/lib/sluice}", "- {name: data, mountPath: /data}", "SLUICE_DATA_DIR=/var/lib/sluice is not where the claim data is mounted"},
		{"no claim template", "templates/statefulset.yaml", "  {{- if .Values.persistence.enabled }}\n  # Each pod's own claim", "  {{- if false }}\n  # Each pod's own claim", "0 volumeClaimTemplates with persistence.enabled"},
		{"a claim of another size", "templates/statefulset.yaml", "storage: {{ .Values.persistence.size | quote }}", "storage: 7Gi", "want persistence.size"},
		{"the storage class ignored", "templates/statefulset.yaml", "storageClassName: {{ . | quote }}", "storageClassName: standard", "want persistence.storageClass"},
		{"the sync interval ignored", "templates/statefulset.yaml", "{{ .Values.persistence.syncInterval | quote }}", `"1s"`, "SLUICE_DATA_SYNC_INTERVAL"},
		{"a lint error", "Chart.yaml", "version: 0.1.0", "version: not-semver", "lint"},
	}
	sets, err := valueSets(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]valueSet{}
	for _, vs := range sets {
		byName[vs.name] = vs
	}
	// The value set a case breaks: the chart's defaults for what they
	// must keep on, the cert-manager values for the TLS wiring, all-on
	// values otherwise.
	setOf := func(name, file, want string) string {
		switch {
		case strings.Contains(want, "chart's defaults"):
			return "default values"
		case strings.Contains(file, "certificates") || strings.Contains(name, "TLS"):
			return "cert-manager-values.yaml"
		}
		return "all-on-values.yaml"
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sluice")
			if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			vs, ok := byName[setOf(c.name, c.file, c.want)]
			if !ok {
				t.Fatalf("no value set %s", setOf(c.name, c.file, c.want))
			}
			if !strings.Contains(string(b), c.old) {
				t.Fatalf("%s has no %q: update the test", c.file, c.old)
			}
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), c.old, c.new)), 0o644); err != nil {
				t.Fatal(err)
			}
			p := checkChart(dir, vs, nil, false)
			if !strings.Contains(strings.Join(p, "\n"), c.want) {
				t.Errorf("problems %q, want one with %q", p, c.want)
			}
		})
	}
}

func TestServeFlagTwins(t *testing.T) {
	// A SLUICE_* variable that is no flag's twin, with a fake flag list.
	vs := valueSet{name: "extraEnv", release: "sluice", values: map[string]any{
		"extraEnv": []any{map[string]any{"name": "SLUICE_NO_SUCH_FLAG", "value": "1"}},
	}}
	flags := map[string]bool{}
	for _, f := range []string{"node-name", "gossip-advertise-addr", "grpc-advertise-addr", "peer-advertise-addr",
		"join", "config", "rls-config", "shutdown-timeout", "store-max-bytes", "cluster-secret-file", "data-dir", "data-sync-interval", "bootstrap-expect"} {
		flags[f] = true
	}
	if p := checkChart(chartDir, valueSet{name: "defaults", release: "sluice"}, flags, false); len(p) > 0 {
		t.Errorf("defaults: %q", p)
	}
	p := checkChart(chartDir, vs, flags, false)
	if !strings.Contains(strings.Join(p, "\n"), "SLUICE_NO_SUCH_FLAG") {
		t.Errorf("problems %q, want SLUICE_NO_SUCH_FLAG named", p)
	}
}

// TestManifestsPodSecurity evaluates the pod template of the plain
// manifests (deploy/kubernetes, which the secure overlay builds on) against
// the restricted Pod Security Standard too, and a copy without its seccomp
// profile to show the evaluation can fail.
func TestManifestsPodSecurity(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/statefulset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, text string
		allowed    bool
	}{
		{"deploy/kubernetes", string(b), true},
		{"without seccompProfile", strings.ReplaceAll(string(b), "seccompProfile: {type: RuntimeDefault}", "seccompProfile: {type: Unconfined}"), false},
	} {
		o, problems := decode(map[string]string{"statefulset.yaml": c.text})
		if len(problems) > 0 || len(o.statefulSets) != 1 {
			t.Fatalf("%s: %q, %d StatefulSets", c.name, problems, len(o.statefulSets))
		}
		for _, sts := range o.statefulSets {
			p := podSecurity(c.name, sts.Spec.Template.ObjectMeta, &sts.Spec.Template.Spec)
			if (len(p) == 0) != c.allowed {
				t.Errorf("%s: problems %q, want allowed %v", c.name, p, c.allowed)
			}
		}
	}
}
