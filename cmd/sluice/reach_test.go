package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// check, usage and members pointed at a closed port say which address
// they tried and how to change it, whether it came from --addr or from
// SLUICE_ADDR.
func TestUnreachableNamesAddrAndFlag(t *testing.T) {
	closed := freeAddr(t) // its listener is closed: connections are refused
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"check --addr", []string{"check", "--addr", closed, "k", "--limit", "1", "--period", "1s"}, ""},
		{"usage --addr", []string{"usage", "--addr", closed, "k", "--limit", "1", "--period", "1s"}, ""},
		{"members --addr", []string{"members", "--addr", closed}, ""},
		{"check SLUICE_ADDR", []string{"check", "k", "--limit", "1", "--period", "1s"}, closed},
		{"members SLUICE_ADDR", []string{"members"}, closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(sluiceBin, tc.args...)
			cmd.Env = os.Environ()
			if tc.env != "" {
				cmd.Env = append(cmd.Env, "SLUICE_ADDR="+tc.env)
			}
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("err %v, want exit 2; output: %s", err, out)
			}
			want := "no answer from Sluice at " + closed + " (change it with --addr or SLUICE_ADDR)"
			if !strings.Contains(string(out), want) {
				t.Fatalf("output %q lacks %q", out, want)
			}
		})
	}
}
