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
	if len(sets) < 2 {
		t.Fatalf("value sets %v: want the defaults and ci/all-on-values.yaml", sets)
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
		{"a fractional memory limit", map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1.5Gi"}}}, "store.maxBytes"},
		{"an empty memory limit", map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": ""}}}, "resources.limits.memory is required"},
		{"a store share of 100%", map[string]any{"store": map[string]any{"memoryPercent": 100}}, "store.memoryPercent"},
		{"a grace period shorter than the shutdown", map[string]any{"terminationGracePeriodSeconds": 10}, "terminationGracePeriodSeconds"},
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
		{"no GOMEMLIMIT", "templates/statefulset.yaml", "- name: GOMEMLIMIT", "- name: GOMEMLIMIT_OFF", "GOMEMLIMIT is not set"},
		{"GOMEMLIMIT from requests", "templates/statefulset.yaml", "resource: limits.memory", "resource: requests.memory", "GOMEMLIMIT is not set"},
		{"no spread over machines", "templates/statefulset.yaml", "topologyKey: kubernetes.io/hostname", "topologyKey: example.com/rack", "kubernetes.io/hostname"},
		{"a store cap not from the limit", "templates/statefulset.yaml", `{{ include "sluice.storeMaxBytes" . | quote }}`, `"1GiB"`, "SLUICE_STORE_MAX_BYTES"},
		{"no PDB", "templates/pdb.yaml", "{{- if .Values.podDisruptionBudget.enabled }}", "{{- if false }}", "PodDisruptionBudget"},
		{"a misspelled field", "templates/statefulset.yaml", "podManagementPolicy: Parallel", "podManagementPolicy: Parallel\n  revisionHistoryLimitt: 3", "unknown field"},
		{"the peer port on the client Service", "templates/service.yaml", "- {name: http, port: 8080", "- {name: peer, port: 8082, targetPort: peer}\n    - {name: http, port: 8080", "exposes the peer port"},
		{"a join address elsewhere", "templates/statefulset.yaml", `-gossip:7946"}`, `:7946"}`, "SLUICE_JOIN"},
		{"a NetworkPolicy open to all on the peer port", "templates/networkpolicy.yaml", "- {port: 8081, protocol: TCP}", "- {port: 8081, protocol: TCP}\n        - {port: 8082, protocol: TCP}", "more than the nodes on port 8082"},
		{"a checksum restart", "templates/statefulset.yaml", "      {{- with .Values.podAnnotations }}\n      annotations:\n",
			"      annotations:\n        checksum/policies: {{ .Values.policies | sha256sum }}\n      {{- with .Values.podAnnotations }}\n", "checksum/policies"},
		{"a lint error", "Chart.yaml", "version: 0.1.0", "version: not-semver", "lint"},
	}
	sets, err := valueSets(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	allOn := sets[len(sets)-1]
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
			if !strings.Contains(string(b), c.old) {
				t.Fatalf("%s has no %q: update the test", c.file, c.old)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(b), c.old, c.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			p := checkChart(dir, allOn, nil, false)
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
		"join", "config", "rls-config", "shutdown-timeout", "store-max-bytes"} {
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
