package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `sluice bench --json` against a real node: checks answered, no errors,
// and the node held every key to its bound.
func TestBenchAgainstServer(t *testing.T) {
	s := startServer(t)
	cmd := exec.Command(sluiceBin, "bench", "--addr", s.grpc, "--duration", "1s", "--keys", "10", "--limit", "5", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice bench: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	var sum struct {
		Checks  int64 `json:"checks"`
		Allowed int64 `json:"allowed"`
		Denied  int64 `json:"denied"`
		Errors  int64 `json:"errors"`
		Latency struct {
			P50 float64 `json:"p50_ms"`
		} `json:"latency"`
		Audit struct {
			Keys      int   `json:"keys"`
			Bound     int64 `json:"bound"`
			OverBound *int  `json:"over_bound"`
		} `json:"audit"`
		Percentiles []json.RawMessage `json:"percentiles"`
		FirstError  string            `json:"first_error"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, &stdout)
	}
	a := sum.Audit
	switch {
	case sum.Checks == 0 || sum.Checks != sum.Allowed+sum.Denied+sum.Errors:
		t.Fatalf("checks %d = allowed %d + denied %d + errors %d?", sum.Checks, sum.Allowed, sum.Denied, sum.Errors)
	case sum.Errors != 0:
		t.Fatalf("%d errors, first: %s", sum.Errors, sum.FirstError)
	case a.OverBound == nil || *a.OverBound != 0 || a.Keys != 10:
		t.Fatalf("audit %+v: want 10 keys, none over bound\n%s", a, &stdout)
	case a.Bound < 5+4 || sum.Allowed > int64(a.Keys)*a.Bound:
		t.Fatalf("allowed %d, bound %d per key for %d keys", sum.Allowed, a.Bound, a.Keys)
	case sum.Latency.P50 <= 0 || len(sum.Percentiles) == 0:
		t.Fatalf("no latency: %s", &stdout)
	}
}

// Bad flags exit 2 naming the flag, before any node is dialled.
func TestBenchBadFlags(t *testing.T) {
	for _, c := range []struct{ args []string }{
		{[]string{"--workers", "-1"}},
		{[]string{"--rate", "-5"}},
		{[]string{"--period", "0"}},
		{[]string{"--batch", "1001"}},
		{[]string{"--keys", "5", "--hot"}},
		{[]string{"--grants", "--rls"}},
		{[]string{"--conns", "2"}},
		{[]string{"--period", "2s", "--rls"}},
	} {
		code, out := sluice(t, append([]string{"bench", "--addr", "127.0.0.1:1"}, c.args...)...)
		if code != 2 || !strings.Contains(out, c.args[0]) {
			t.Errorf("%v: exit %d, output %q; want 2 naming %s", c.args, code, out, c.args[0])
		}
	}
	code, out := sluice(t, "bench", "-h")
	if code != 0 || !strings.Contains(out, "-rate") || !strings.Contains(out, "SLUICE_WORKERS") {
		t.Errorf("bench -h: exit %d, output %q", code, out)
	}
}

// --print-rls-config prints the ratelimit config an RLS bench needs, for
// the flags given, without dialling a node.
func TestBenchPrintRLSConfig(t *testing.T) {
	code, out := sluice(t, "bench", "--rls", "--print-rls-config", "--rls-domain", "edge", "--rls-key", "remote_address",
		"--limit", "50", "--period", "1m", "--addr", "127.0.0.1:1")
	want := "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: minute\n      requests_per_unit: 50\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d, output:\n%s\nwant:\n%s", code, out, want)
	}
}

// `sluice bench --rls` against a real node serving the config
// --print-rls-config printed: ShouldRateLimit calls answered, no errors,
// and the fixed windows held every key to the audit's bound.
func TestBenchRLSAgainstServer(t *testing.T) {
	code, cfg := sluice(t, "bench", "--rls", "--print-rls-config", "--limit", "5", "--period", "1h")
	if code != 0 {
		t.Fatalf("--print-rls-config: exit %d: %s", code, cfg)
	}
	path := filepath.Join(t.TempDir(), "bench.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--rls-config", path)
	cmd := exec.Command(sluiceBin, "bench", "--rls", "--addr", s.grpc, "--conns", "2", "--duration", "1s", "--keys", "10",
		"--limit", "5", "--period", "1h", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice bench --rls: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	var sum struct {
		Checks, Allowed, Denied, Errors int64
		FirstError                      string `json:"first_error"`
		Audit                           struct {
			Keys      int   `json:"keys"`
			Bound     int64 `json:"bound"`
			OverBound *int  `json:"over_bound"`
		} `json:"audit"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not the JSON summary: %v\n%s", err, &stdout)
	}
	switch {
	case sum.Errors != 0:
		t.Fatalf("%d errors, first: %s", sum.Errors, sum.FirstError)
	case (sum.Allowed != 10*5 && sum.Allowed != 10*5*2) || sum.Denied == 0:
		// One hour window (two if the run straddles the hour): 5 per key.
		t.Fatalf("allowed %d, denied %d: want 5 per key per window", sum.Allowed, sum.Denied)
	case sum.Audit.OverBound == nil || *sum.Audit.OverBound != 0 || sum.Audit.Keys != 10 || sum.Audit.Bound != 10:
		t.Fatalf("audit %+v: want 10 keys, bound 2 × 5, none over", sum.Audit)
	}
}

// A run whose checks fail exits 1 naming the errors (a node without an RLS
// config answers every RLS call with an error); --max-error-rate 1 lets
// the same run exit 0, and a bad --max-error-rate exits 2.
func TestBenchExitOnErrors(t *testing.T) {
	s := startServer(t)
	args := []string{"bench", "--rls", "--addr", s.grpc, "--duration", "300ms", "--keys", "3", "--limit", "5", "--period", "1h"}
	code, out := sluice(t, args...)
	if code != 1 || !strings.Contains(out, "checks failed") || !strings.Contains(out, "--max-error-rate 0") {
		t.Errorf("every check an error: exit %d, output %s; want 1 naming the errors", code, out)
	}
	if code, out := sluice(t, append(args, "--max-error-rate", "1")...); code != 0 {
		t.Errorf("--max-error-rate 1: exit %d, output %s; want 0", code, out)
	}
	for _, v := range []string{"-0.1", "1.5", "NaN"} {
		if code, out := sluice(t, "bench", "--addr", "127.0.0.1:1", "--max-error-rate", v); code != 2 || !strings.Contains(out, "--max-error-rate") {
			t.Errorf("--max-error-rate %s: exit %d, output %q; want 2 naming the flag", v, code, out)
		}
	}
}
