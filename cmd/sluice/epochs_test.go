package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A bad --bootstrap-expect (or SLUICE_BOOTSTRAP_EXPECT) stops `sluice
// serve` at once (exit 2), naming the flag.
func TestServeBootstrapExpectBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"negative", []string{"--bootstrap-expect", "-1"}, nil, "--bootstrap-expect: must be >= 0"},
		{"not a number", []string{"--bootstrap-expect", "three"}, nil, `invalid value "three" for flag -bootstrap-expect`},
		{"fraction", []string{"--bootstrap-expect=1.5"}, nil, "-bootstrap-expect"},
		{"negative by env", nil, []string{"SLUICE_BOOTSTRAP_EXPECT=-3"}, "--bootstrap-expect: must be >= 0"},
		{"not a number by env", nil, []string{"SLUICE_BOOTSTRAP_EXPECT=all"}, "SLUICE_BOOTSTRAP_EXPECT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(sluiceBin, serveArgs(tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("err %v, want exit 2; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "BootstrapExpect") {
				t.Errorf("the output does not name %q (or names the Config field):\n%s", tc.want, out)
			}
		})
	}
}

// `sluice members` of a node alone shows it leading its group of one at
// epoch 1, in the table and in JSON.
func TestMembersShowsEpochs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	s := startServer(t)
	var out string
	waitUntil(t, "members shows the leader at epoch 1", func() bool {
		var code int
		code, out = sluice(t, "members", "--addr", s.grpc, "--json")
		return code == 0 && strings.Contains(out, `"raft_role":"leader"`) && strings.Contains(out, `"epoch":1`)
	})
	if !strings.Contains(out, `"raft_group":"`) {
		t.Errorf("members --json has no raft_group: %s", out)
	}
	code, table := sluice(t, "members", "--addr", s.grpc)
	lines := strings.Split(table, "\n")
	if code != 0 || len(lines) < 2 || !strings.Contains(lines[0], "RAFT") || !strings.Contains(lines[0], "EPOCH") ||
		!strings.Contains(strings.Join(strings.Fields(lines[1]), " "), "leader") {
		t.Fatalf("members: exit %d, table:\n%s", code, table)
	}
}
