package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"plan", "--rps", "100000", "--keys", "1e7", "--nodes", "3"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	// The default --replicas, as sluice serve's auto, is 1 on 3 nodes: each
	// node holds its third of the keys and a copy of another third.
	for _, s := range []string{"1 replicas", "6,666,667", "277.3 MiB", "254.3 MiB", "508.6 MiB", "0.42 cores", "66,667/s"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("no %q in:\n%s", s, out.String())
		}
	}

	out.Reset()
	code = run(context.Background(), []string{"plan", "--rps=90000", "--keys=3000000", "--replicas=1", "--json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var e struct {
		Input struct {
			Replicas int `json:"replicas"`
		} `json:"input"`
		KeysPerNode float64 `json:"keys_per_node"`
		Forwarded   float64 `json:"forwarded_checks_per_sec"`
	}
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatalf("--json: %v\n%s", err, out.String())
	}
	if e.Input.Replicas != 1 || e.KeysPerNode != 2_000_000 || e.Forwarded != 60_000 {
		t.Errorf("--json: %+v", e)
	}
}

func TestPlanBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		flag string // named in the error
	}{
		{"no rps", []string{"--keys", "10"}, "--rps is required"},
		{"no keys", []string{"--rps", "10"}, "--keys is required"},
		{"zero rps", []string{"--rps", "0", "--keys", "10"}, "--rps"},
		{"negative rps", []string{"--rps", "-100", "--keys", "10"}, "--rps"},
		{"non-numeric rps", []string{"--rps", "lots", "--keys", "10"}, "-rps"},
		{"NaN rps", []string{"--rps", "NaN", "--keys", "10"}, "-rps"},
		{"absurd rps", []string{"--rps", "1e300", "--keys", "10"}, "--rps"},
		{"zero keys", []string{"--rps", "10", "--keys", "0"}, "--keys"},
		{"negative keys", []string{"--rps", "10", "--keys", "-5"}, "--keys"},
		{"non-numeric keys", []string{"--rps", "10", "--keys", "ten"}, "-keys"},
		{"fractional keys", []string{"--rps", "10", "--keys", "2.5"}, "--keys"},
		{"absurd keys", []string{"--rps", "10", "--keys", "1e20"}, "--keys"},
		{"zero nodes", []string{"--rps", "10", "--keys", "10", "--nodes", "0"}, "--nodes"},
		{"negative nodes", []string{"--rps", "10", "--keys", "10", "--nodes", "-1"}, "--nodes"},
		{"non-numeric nodes", []string{"--rps", "10", "--keys", "10", "--nodes", "three"}, "-nodes"},
		{"absurd nodes", []string{"--rps", "10", "--keys", "10", "--nodes", "99999999999999999999"}, "-nodes"},
		{"negative replicas", []string{"--rps", "10", "--keys", "10", "--replicas", "-1"}, "--replicas"},
		{"replicas beyond the nodes", []string{"--rps", "10", "--keys", "10", "--replicas", "3"}, "--replicas"},
		{"non-numeric replicas", []string{"--rps", "10", "--keys", "10", "--replicas", "one"}, "-replicas"},
		{"routed share above 1", []string{"--rps", "10", "--keys", "10", "--routed-share", "2"}, "--routed-share"},
		{"negative grant share", []string{"--rps", "10", "--keys", "10", "--grant-share", "-0.5"}, "--grant-share"},
		{"an argument", []string{"--rps", "10", "--keys", "10", "extra"}, "unexpected arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), append([]string{"plan"}, c.args...), &out, &errb)
			if code != exitError {
				t.Errorf("exit %d, want %d", code, exitError)
			}
			if !strings.Contains(errb.String(), c.flag) {
				t.Errorf("stderr does not name %q:\n%s", c.flag, errb.String())
			}
			if out.Len() != 0 {
				t.Errorf("printed an estimate:\n%s", out.String())
			}
		})
	}
}

// Without --replicas, plan counts the heirs sluice serve's auto gives the
// nodes: 2 on 5 nodes, 0 on one.
func TestPlanReplicasAsServeAuto(t *testing.T) {
	for nodes, want := range map[string]string{"5": "2 replicas", "1": "0 replicas"} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"plan", "--rps", "1000", "--keys", "1e6", "--nodes", nodes}, &out, &errb); code != 0 {
			t.Fatalf("--nodes %s: exit %d: %s", nodes, code, errb.String())
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("--nodes %s: want %q in:\n%s", nodes, want, out.String())
		}
	}
}
