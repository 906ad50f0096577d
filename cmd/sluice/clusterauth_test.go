package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Bad cluster authentication settings stop `sluice serve` at once (exit
// 2) with an error naming the flag; flags and their SLUICE_* twins alike.
func TestServeClusterAuthBadInput(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short.secret")
	writeKeyFile(t, short, "# rotated\nc2hvcnQ=\n")
	base := []string{"serve", "--gossip-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0"}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"join without authentication", []string{"--join", "127.0.0.1:1"}, nil,
			[]string{"--join: a node that joins others needs cluster authentication", "--cluster-secret-file", "SLUICE_CLUSTER_SECRET_FILE", "--peer-tls-cert-file", "--insecure"}},
		{"short secret", []string{"--cluster-secret-file", short}, nil,
			[]string{"--cluster-secret-file", short + " line 2: secret is 5 bytes, want 32 to 64"}},
		{"short secret by env", nil, []string{"SLUICE_CLUSTER_SECRET_FILE=" + short},
			[]string{"--cluster-secret-file", short + " line 2"}},
		{"missing secret", []string{"--cluster-secret-file", short + ".missing"}, nil,
			[]string{"--cluster-secret-file", "no such file"}},
		{"secret and insecure", []string{"--cluster-secret-file", clusterSecretFile, "--insecure"}, nil,
			[]string{"--insecure: not with --cluster-secret-file"}},
		{"secret and gossip key", []string{"--cluster-secret-file", clusterSecretFile, "--gossip-key-file", clusterSecretFile}, nil,
			[]string{"--cluster-secret-file: not with --gossip-key-file"}},
		{"insecure not a bool", nil, []string{"SLUICE_INSECURE=maybe"}, []string{"SLUICE_INSECURE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(sluiceBin, append(base, tc.args...)...)
			cmd.Env = append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("err %v, want exit 2; output:\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("the output does not name %q:\n%s", w, out)
				}
			}
		})
	}
}

// --insecure is a WARN at every start and a line of `sluice members`; the
// quickstart (no flags) logs that it is a cluster of one and how to
// cluster, and is not insecure.
func TestServeInsecureAndAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	s := startServer(t, "--insecure")
	waitUntil(t, "the INSECURE warning", func() bool {
		return strings.Contains(s.stderr.String(), "level=WARN msg=\"cluster: INSECURE")
	})
	code, out := sluice(t, "members", "--addr", s.grpc)
	if code != 0 || !strings.Contains(out, "insecure: p1 runs its cluster without authentication (--insecure)") {
		t.Fatalf("sluice members of an insecure node: exit %d, output:\n%s\nwant the insecure line", code, out)
	}
	if code, out := sluice(t, "members", "--addr", s.grpc, "--json"); code != 0 || !strings.Contains(out, `"insecure":true`) {
		t.Fatalf("sluice members --json of an insecure node: exit %d, %s", code, out)
	}
	alone := startServer(t, "--gossip-key-file", "") // no secret from the tests' environment
	waitUntil(t, "the cluster-of-one line", func() bool {
		return strings.Contains(alone.stderr.String(), "level=INFO msg=\"cluster: a cluster of one")
	})
	if code, out := sluice(t, "members", "--addr", alone.grpc); code != 0 || strings.Contains(out, "insecure") {
		t.Fatalf("sluice members of a node alone: exit %d, output:\n%s\nwant no insecure line", code, out)
	}
}
