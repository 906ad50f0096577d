package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// --only rls selects f and g; the RLS scenarios take Sluice and
// envoyproxy/ratelimit only, the others never take envoyproxy/ratelimit.
func TestOnlyRLSAndWhoRuns(t *testing.T) {
	o, err := parseFlags([]string{"--only", "rls"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.only) != 2 || !o.only["f"] || !o.only["g"] {
		t.Fatalf("--only rls: %v, want f and g", o.only)
	}
	if _, err := parseFlags([]string{"--only", "i"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--only") {
		t.Fatalf("--only i: %v", err)
	}
	for _, sc := range scenarios {
		for _, sys := range allSystems {
			want := sys != "ratelimit" && sys != "sluice1" && sys != "sluice-owner"
			if sc.RLS {
				want = sys == "sluice" || sys == "sluice-owner" || sys == "sluice1" || sys == "ratelimit" || sys == "echo"
			}
			if sc.runs(sys) != want {
				t.Errorf("(%s) runs %s = %v", sc.ID, sys, !want)
			}
		}
	}
}

// The RLS targets: at 64 callers (g), 3× envoyproxy/ratelimit's calls/s and a
// lower p99, for the 3-node and the 1-node Sluice; the RLS section shows f
// and g and only their targets, and the other section none of them.
func TestRLSTargetsAndSection(t *testing.T) {
	const ms = time.Millisecond
	rep := &Report{Date: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), Command: "make bench-compare", Flags: "--only rls",
		Systems: []string{"sluice", "sluice-owner", "sluice1", "redis", "echo", "ratelimit"}, RLSConfig: rlsConfigYAML(),
		Scenarios: []ScenarioInfo{{ID: "a", Title: "A"}, {ID: "f", Title: "F", RLS: true}, {ID: "g", Title: "G", RLS: true}}}
	rep.Results = []Result{
		res("a", "sluice", 1000, ms, 1), res("a", "redis", 900, ms, 1),
		res("f", "sluice", 20_000, ms, 1), res("f", "ratelimit", 9_000, 2*ms, 2),
		res("g", "sluice", 30_000, 3*ms, 1), res("g", "ratelimit", 10_000, 4*ms, 2),
		res("g", "sluice1", 40_000, 2*ms, 1), res("g", "sluice-owner", 35_000, 2*ms, 1),
	}
	const three, one, owner = "Sluice (3 nodes): ", "Sluice (1 node): ", "Sluice (3 nodes), to the owner: "
	ts := evaluateTargets(rep)
	for _, p := range []string{three, one, owner} {
		if st := statusOf(ts, "g", p+"calls/s ≥ 3×"); st != statusMet {
			t.Errorf("g %scalls/s ≥ 3×: %s", p, st)
		}
		if st := statusOf(ts, "g", p+"p99 <"); st != statusMet {
			t.Errorf("g %sp99 <: %s", p, st)
		}
	}
	rep.Results[4] = res("g", "sluice", 29_000, 4*ms, 1)
	ts = evaluateTargets(rep)
	if statusOf(ts, "g", three+"calls/s ≥ 3×") != statusMissed || statusOf(ts, "g", three+"p99 <") != statusMissed {
		t.Errorf("g 2.9× with an equal p99: %v", targetsOf(ts, true))
	}
	if statusOf(ts, "g", one+"calls/s ≥ 3×") != statusMet {
		t.Errorf("g 1 node: %v", targetsOf(ts, true))
	}
	rlsRep := rep.only(isRLS)
	if strings.Join(rlsRep.Systems, ",") != "sluice,sluice-owner,sluice1,echo,ratelimit" {
		t.Errorf("RLS systems %v", rlsRep.Systems)
	}
	md := renderRLSSection(rlsRep, targetsOf(ts, true), "rls.svg")
	for _, want := range []string{"### (f) F", "### (g) G", "| envoyproxy/ratelimit + Redis | 9,000 |", "calls/s", "requests_per_unit: 100",
		"| (g) | Sluice (3 nodes): calls/s ≥ 3×", "| (g) | Sluice (1 node): p99 <", "| Sluice (1 node) | 40,000 |", "![RLS latency](rls.svg)",
		"| Sluice (3 nodes), to the owner | 35,000 |", "called by a ring-aware caller"} {
		if !strings.Contains(md, want) {
			t.Errorf("RLS section lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "### (a)") || strings.Contains(md, "| (a) |") {
		t.Errorf("RLS section has scenario a:\n%s", md)
	}
	main := renderSection(rep.only(isNotRLS), targetsOf(ts, false), "")
	if strings.Contains(main, "### (f)") || strings.Contains(main, "| (g) |") || strings.Contains(main, "ratelimit") {
		t.Errorf("main section has RLS scenarios:\n%s", main)
	}
	doc := replaceBetween(replaceSection("# Benchmarks\n", "main\n"), rlsMarkerBegin, rlsMarkerEnd, "rls\n")
	doc = replaceSection(doc, "main 2\n")
	if !strings.Contains(doc, markerBegin+"\nmain 2\n"+markerEnd) || !strings.Contains(doc, rlsMarkerBegin+"\nrls\n"+rlsMarkerEnd) {
		t.Errorf("sections do not keep each other:\n%s", doc)
	}
}
