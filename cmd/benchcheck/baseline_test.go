package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The committed baseline parses, and holds a figure of each kind.
func TestCommittedBaselineParses(t *testing.T) {
	f, err := os.Open("baseline.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	figs, err := parseBaseline(f)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, fg := range figs {
		kinds[fg.metric] = true
	}
	if !kinds["allocs/op"] || !kinds["instr/op"] {
		t.Errorf("baseline.txt has metrics %v, want allocs/op and instr/op", kinds)
	}
}

func TestParseBaselineBadInput(t *testing.T) {
	for _, tc := range []struct{ in, field string }{
		{"node/B allocs/op", "fields"},
		{"node/B allocs/op 1 2% extra", "fields"},
		{"node/B bytes/op 1", "metric"},
		{"node/B allocs/op x", "value"},
		{"node/B allocs/op -1", "value"},
		{"node/B allocs/op NaN", "value"},
		{"node/B allocs/op +Inf", "value"},
		{"node/B instr/op 10 3", "tolerance"},
		{"node/B instr/op 10 x%", "tolerance"},
		{"node/B instr/op 10 101%", "tolerance"},
		{"node/B instr/op 10 -1%", "tolerance"},
		{"node/B allocs/op 1\nnode/B allocs/op 2", "name"},
	} {
		_, err := parseBaseline(strings.NewReader(tc.in))
		if !errors.Is(err, ErrBaseline) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("parseBaseline(%q) = %v, want an ErrBaseline naming %s", tc.in, err, tc.field)
		}
	}
}

// A baseline written by formatBaseline reads back the same.
func TestBaselineRoundTrip(t *testing.T) {
	figs := []figure{
		{name: "node/BenchmarkNodeCheck/grpc/callers=1", metric: "instr/op", value: 123456, tolerance: 0.03},
		{name: "limiter/BenchmarkCheckActivity/off", metric: "allocs/op", value: 0},
		{name: "api/BenchmarkShouldRateLimit/descriptors=1", metric: "allocs/op", value: 7, tolerance: 0.5},
	}
	var b bytes.Buffer
	if err := formatBaseline(&b, []string{"a header", ""}, figs); err != nil {
		t.Fatal(err)
	}
	back, err := parseBaseline(&b)
	if err != nil {
		t.Fatal(err)
	}
	want := []figure{figs[2], figs[1], figs[0]} // sorted by name
	if !reflect.DeepEqual(back, want) {
		t.Errorf("read back %+v, want %+v", back, want)
	}
}

func TestCompare(t *testing.T) {
	base := []figure{
		{name: "a", metric: "allocs/op", value: 3},
		{name: "a2", metric: "allocs/op", value: 3},
		{name: "b", metric: "allocs/op", value: 3},
		{name: "c", metric: "instr/op", value: 1000, tolerance: 0.03},
		{name: "d", metric: "instr/op", value: 1000, tolerance: 0.03},
		{name: "e", metric: "allocs/op", value: 0},
	}
	got := []figure{
		{name: "a", metric: "allocs/op", value: 4},    // one more allocation: fails
		{name: "a2", metric: "allocs/op", value: 3.4}, // the background's fraction: passes
		{name: "b", metric: "allocs/op", value: 2},    // fewer: passes, says so
		{name: "c", metric: "instr/op", value: 1029},  // within 3%
		{name: "d", metric: "instr/op", value: 1031},  // over 3%: fails
		// e not measured: fails
		{name: "f", metric: "allocs/op", value: 1}, // no baseline: reported
	}
	vs := compare(base, got)
	var failed []string
	for _, v := range vs {
		if v.fail {
			failed = append(failed, v.base.name)
		}
	}
	if want := []string{"a", "d", "e"}; !reflect.DeepEqual(failed, want) {
		t.Errorf("failed %v, want %v", failed, want)
	}
	var out bytes.Buffer
	if !report(&out, vs) {
		t.Error("report says nothing failed")
	}
	for _, want := range []string{"FAIL: over the baseline by more than 0.5", "+33.3%", "FAIL: not measured", "below the baseline", "no baseline"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseBenchOutput(t *testing.T) {
	text := `goos: linux
BenchmarkNodeCheck/grpc/callers=1-2         	    5000	     61234 ns/op	     15857 client-cpu-ns/op	      12.966 node-allocs/op	    1234 B/op	      12 allocs/op
BenchmarkCheckActivity/off-2   	  200000	       312.0 ns/op	       0 B/op	       0 allocs/op
PASS
`
	figs, err := parseBenchOutput("node", text)
	if err != nil {
		t.Fatal(err)
	}
	want := []figure{
		{name: "node/BenchmarkNodeCheck/grpc/callers=1", metric: "allocs/op", value: 12.97}, // node-allocs/op, rounded
		{name: "node/BenchmarkCheckActivity/off", metric: "allocs/op", value: 0},
	}
	if !reflect.DeepEqual(figs, want) {
		t.Errorf("got %+v, want %+v", figs, want)
	}
	if _, err := parseBenchOutput("node", "PASS\n"); err == nil {
		t.Error("output without benchmarks: no error")
	}
}

// The measured dump is the last one the marker triggered, not the one
// written when the program ended.
func TestLastMarkedDump(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cg.out")
	write := func(suffix, trigger, totals string) {
		body := "version: 1\ndesc: Trigger: " + trigger + "\nevents: Ir\n" + totals + "\n"
		if err := os.WriteFile(out+suffix, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".1", "--dump-before=github.com/sluice-rl/sluice/node_test.callgrindDump", "totals: 100")
	write(".2", "--dump-before=github.com/sluice-rl/sluice/node_test.callgrindDump", "totals: 5000")
	write(".10", "Program termination", "totals: 99999")
	got, err := lastMarkedDump(out)
	if err != nil || got != 5000 {
		t.Errorf("lastMarkedDump = %d, %v; want 5000", got, err)
	}
	write(".2", "--dump-before=github.com/sluice-rl/sluice/node_test.callgrindDump", "")
	if _, err := lastMarkedDump(out); err == nil {
		t.Error("a dump without totals: no error")
	}
}
