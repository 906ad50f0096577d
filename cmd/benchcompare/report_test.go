package main

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/bench"
)

func TestReplaceSectionKeepsTheRest(t *testing.T) {
	before := "# Benchmarks\n\nIntro, with trailing spaces  \r\nand a tab\t.\n\n"
	after := "\n\n## bucket\n\n| a | b |\n|---|---|\n\nno final newline"
	doc := before + markerBegin + "\nold section\nmore old text\n" + markerEnd + after
	got := replaceSection(doc, "## New\n\nfigures")
	want := before + markerBegin + "\n## New\n\nfigures\n" + markerEnd + after
	if got != want {
		t.Fatalf("replaceSection:\n got %q\nwant %q", got, want)
	}
	// Running it again on its own output changes only the section.
	again := replaceSection(got, "## Newer\n")
	if want := before + markerBegin + "\n## Newer\n" + markerEnd + after; again != want {
		t.Fatalf("second replaceSection:\n got %q\nwant %q", again, want)
	}
}

func TestReplaceSectionAppendsMarkers(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"# B\n\ntext\n", "# B\n\ntext\n\n" + markerBegin + "\nS\n" + markerEnd + "\n"},
		{"# B\n\ntext", "# B\n\ntext\n\n" + markerBegin + "\nS\n" + markerEnd + "\n"},
		{"", markerBegin + "\nS\n" + markerEnd + "\n"},
		// An end marker before the begin marker is not a section.
		{markerEnd + "\n" + markerBegin + "\n", markerEnd + "\n" + markerBegin + "\n\n" + markerBegin + "\nS\n" + markerEnd + "\n"},
	} {
		if got := replaceSection(tc.doc, "S\n"); got != tc.want {
			t.Errorf("replaceSection(%q):\n got %q\nwant %q", tc.doc, got, tc.want)
		}
	}
}

// res is a result with the figures the targets look at.
func res(sc, sys string, cps float64, p99 time.Duration, cpu float64) Result {
	return Result{Scenario: sc, System: sys, Grants: sys == "sluice", CPUPerMillion: cpu,
		Summary: &bench.Summary{Checks: 1000, ChecksPerSec: cps, Latency: bench.Latency{P99: p99}}}
}

func statusOf(ts []Target, sc, prefix string) string {
	for _, t := range ts {
		if t.Scenario == sc && strings.HasPrefix(t.Name, prefix) {
			return t.Status
		}
	}
	return "absent"
}

func TestEvaluateTargets(t *testing.T) {
	ms := time.Millisecond
	rep := &Report{Scenarios: []ScenarioInfo{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d", Rate: 100_000}}}
	rep.Results = []Result{
		// (a): faster and lower p99, more CPU.
		res("a", "sluice", 20_000, 1*ms, 30), res("a", "redis", 20_000, 2*ms, 20),
		// (b): slower, p99 equal (met: ≤), less CPU.
		res("b", "sluice", 19_999, 2*ms, 10), res("b", "redis", 20_000, 2*ms, 20),
		// (c): exactly 5×; one key over its bound.
		res("c", "sluice", 100_000, ms, 5), res("c", "redis", 20_000, ms, 5),
		// (d): 99% of offered, p99 just over 5 ms.
		res("d", "sluice", 99_000, 5*ms+1, 5), {Scenario: "d", System: "redis", Error: "boom"},
	}
	rep.result("c", "sluice").Summary.Audit = bench.Audit{Keys: 1, Bound: 100, WorstAdmitted: 101, OverBound: 1}
	rep.result("d", "sluice").Rate = 100_000
	rep.Memory = []MemResult{{System: "sluice", Keys: 10_000_000, Filled: 10_000_000, RSSBefore: 20 << 20, RSS: 999_000_000}}
	ts := evaluateTargets(rep)
	for _, c := range []struct{ sc, name, want string }{
		{"a", "checks/s", statusMet},
		{"a", "p99", statusMet},
		{"a", "CPU", statusMissed},
		{"b", "checks/s", statusMissed},
		{"b", "p99", statusMet},
		{"b", "CPU", statusMet},
		{"c", "hot key", statusMet},
		{"c", "accuracy", statusMissed},
		{"c", "CPU", statusMet},
		{"d", "achieved", statusMet},
		{"d", "p99", statusMissed},
		{"d", "CPU", statusNA}, // Redis failed
		{"e", "RSS", statusMet},
		{"e", "≤ 48 B/key", statusMissed}, // 97.9 B/key
	} {
		if got := statusOf(ts, c.sc, c.name); got != c.want {
			t.Errorf("(%s) %s: %s, want %s", c.sc, c.name, got, c.want)
		}
	}

	// Fewer keys than 10M: judged on the projection.
	rep.Memory[0] = MemResult{System: "sluice", Keys: 100_000, Filled: 100_000, RSSBefore: 20 << 20, RSS: 20<<20 + 100_000*200}
	if got := statusOf(evaluateTargets(rep), "e", "RSS"); got != statusMissed {
		t.Errorf("(e) 200 B/key projected: %s, want missed", got)
	}
	rep.Memory[0].RSS = 20<<20 + 100_000*40
	if got := statusOf(evaluateTargets(rep), "e", "RSS"); got != statusMet {
		t.Errorf("(e) 40 B/key projected: %s, want met", got)
	}
	if got := statusOf(evaluateTargets(rep), "e", "≤ 48 B/key"); got != statusNA {
		t.Errorf("(e) B/key from 100,000 keys: %s, want n/a (stated at 10M)", got)
	}
	rep.Memory[0] = MemResult{System: "sluice", Keys: 10_000_000, Filled: 10_000_000, RSSBefore: 20 << 20, RSS: 20<<20 + 480_000_000}
	if got := statusOf(evaluateTargets(rep), "e", "≤ 48 B/key"); got != statusMet {
		t.Errorf("(e) 48 B/key: %s, want met", got)
	}
	rep.Memory[0].RSS++
	if got := statusOf(evaluateTargets(rep), "e", "≤ 48 B/key"); got != statusMissed {
		t.Errorf("(e) 48.0000001 B/key: %s, want missed", got)
	}
	rep.Memory[0].Error = "refused"
	if got := statusOf(evaluateTargets(rep), "e", "RSS"); got != statusNA {
		t.Errorf("(e) failed: %s, want n/a", got)
	}
	if got := statusOf(evaluateTargets(rep), "e", "≤ 48 B/key"); got != statusNA {
		t.Errorf("(e) failed: %s, want n/a", got)
	}

	// Scenarios not run have no targets.
	only := &Report{Scenarios: []ScenarioInfo{{ID: "b"}}}
	if ts := evaluateTargets(only); statusOf(ts, "a", "") != "absent" || statusOf(ts, "b", "checks/s") != statusNA {
		t.Errorf("only (b), not run: %+v", ts)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		if got := fmtInt(n); got != want {
			t.Errorf("fmtInt(%d) = %q, want %q", n, got, want)
		}
	}
	if got := fmtMs(1500 * time.Microsecond); got != "1.50 ms" {
		t.Errorf("fmtMs = %q", got)
	}
}

// The section renders every scenario's table and the targets, and the plot
// draws, with a failed system among them.
func TestRenderAndPlot(t *testing.T) {
	rep := &Report{Date: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Command: "make bench-compare",
		Systems: []string{"sluice", "redis", "echo"}, Grants: "c",
		Scenarios: []ScenarioInfo{{ID: "a", Title: "A"}, {ID: "d", Title: "D", Rate: 100_000}}}
	pts := []bench.Point{{Percentile: 0, Latency: time.Millisecond}, {Percentile: 50, Latency: time.Millisecond},
		{Percentile: 99, Latency: 3 * time.Millisecond}, {Percentile: 99.9, Latency: 9 * time.Millisecond}}
	for _, sc := range []string{"a", "d"} {
		for _, sys := range []string{"sluice", "echo"} {
			r := res(sc, sys, 1000, time.Millisecond, 1)
			r.Summary.Percentiles = pts
			rep.Results = append(rep.Results, r)
		}
		rep.Results = append(rep.Results, Result{Scenario: sc, System: "redis", Error: "connection | refused"})
	}
	md := renderSection(rep, evaluateTargets(rep), "x.svg")
	for _, want := range []string{"### (a) A", "### (d) D", "| Redis + Lua | error: connection \\| refused |", "![latency](x.svg)", "### Targets"} {
		if !strings.Contains(md, want) {
			t.Errorf("section lacks %q:\n%s", want, md)
		}
	}
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(line, "| Redis + Lua | error") {
			// The error row has as many cells as the header.
			cells := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") - 1
			if cells != 9 && cells != 10 {
				t.Errorf("error row has %d cells: %q", cells, line)
			}
		}
	}
	svg, err := latencySVG(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svg), "<svg") {
		t.Errorf("not an SVG")
	}
}

// Scenario h's table has a column per number of callers and a row per
// system that ran, Sluice's named with its grants.
func TestCurveTable(t *testing.T) {
	rep := &Report{Systems: []string{"sluice", "sluice-nogrants", "redis"}, Curve: []int{1, 8}}
	for _, n := range rep.Curve {
		for _, sys := range rep.Systems {
			s := &bench.Summary{Checks: 1, ChecksPerSec: float64(1000 * n), Latency: bench.Latency{P99: time.Millisecond}}
			rep.Results = append(rep.Results, Result{Scenario: fmt.Sprintf("h%d", n), System: sys, Summary: s, Grants: sys == "sluice"})
		}
	}
	var b strings.Builder
	writeCurve(&b, rep)
	out := b.String()
	for _, want := range []string{"| system | 1 | 8 |", "| Sluice (3 nodes), grants on | 1,000 (1.00 ms) | 8,000 (1.00 ms) |",
		"| Sluice (3 nodes), grants off |", "| Redis + Lua |"} {
		if !strings.Contains(out, want) {
			t.Errorf("curve table lacks %q:\n%s", want, out)
		}
	}
	if _, err := parseFlags([]string{"--curve-duration", "0"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--curve-duration") {
		t.Errorf("--curve-duration 0: %v", err)
	}
}
