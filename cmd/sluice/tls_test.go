package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/internal/testcerts"
)

// `sluice serve` with mTLS: check, usage, members and bench pass with the
// TLS flags (or their env twins), fail without a client certificate.
func TestCLITLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	caFile := testcerts.Write(t, dir, "ca.crt", ca.PEM)
	cert, key := testcerts.WritePair(t, dir, "node", ca.PeerAndServer(t, "node", "sluice-peer"))
	ccert, ckey := testcerts.WritePair(t, dir, "client", ca.Client(t, "cli"))
	s := startServer(t, "--tls-cert-file", cert, "--tls-key-file", key, "--tls-client-ca-file", caFile)
	tlsArgs := []string{"--addr", s.grpc, "--tls-ca-file", caFile, "--tls-cert-file", ccert, "--tls-key-file", ckey}
	if code, out := sluice(t, append([]string{"check", "k", "--limit", "10", "--period", "1h"}, tlsArgs...)...); code != 0 {
		t.Fatalf("check with TLS flags: exit %d: %s", code, out)
	}
	if code, out := sluice(t, append([]string{"usage", "k", "--limit", "10", "--period", "1h"}, tlsArgs...)...); code != 0 || !strings.Contains(out, "9") {
		t.Fatalf("usage with TLS flags: exit %d: %s", code, out)
	}
	if code, out := sluice(t, append([]string{"members"}, tlsArgs...)...); code != 0 || !strings.Contains(out, "p1") {
		t.Fatalf("members with TLS flags: exit %d: %s", code, out)
	}
	if code, out := sluice(t, append([]string{"bench", "--duration", "1s", "--keys", "10", "--json"}, tlsArgs...)...); code != 0 || !strings.Contains(out, `"errors": 0`) {
		t.Fatalf("bench with TLS flags: exit %d: %s", code, out)
	}
	// The env twins.
	cmd := exec.Command(sluiceBin, "check", "k", "--limit", "10", "--period", "1h", "--addr", s.grpc)
	cmd.Env = append(os.Environ(), "SLUICE_TLS_CA_FILE="+caFile, "SLUICE_TLS_CERT_FILE="+ccert, "SLUICE_TLS_KEY_FILE="+ckey)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("check with SLUICE_TLS_*: %v: %s", err, out)
	}
	if code, out := sluice(t, "check", "k", "--limit", "10", "--period", "1h", "--addr", s.grpc, "--tls-ca-file", caFile); code != 2 {
		t.Fatalf("check without a client certificate: exit %d, want 2: %s", code, out)
	}
	if code, out := sluice(t, "check", "k", "--limit", "10", "--period", "1h", "--addr", s.grpc); code != 2 {
		t.Fatalf("plaintext check: exit %d, want 2: %s", code, out)
	}
}

// configField matches a node.Config field name like TLSCertFile.
var configField = regexp.MustCompile(`\b[A-Z][A-Za-z]*TLS[A-Za-z]*File\b`)

// Bad TLS flags are errors naming the flag.
func TestCLITLSBadFlags(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	cert, key := testcerts.WritePair(t, dir, "server", ca.Server(t))
	junk := testcerts.Write(t, dir, "junk", []byte("junk"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "k", "--limit", "1", "--period", "1s", "--tls-cert-file", cert}, "--tls-key-file"},
		{[]string{"check", "k", "--limit", "1", "--period", "1s", "--tls-ca-file", junk}, "--tls-ca-file"},
		{[]string{"members", "--tls-ca-file", dir + "/missing"}, "--tls-ca-file"},
		{[]string{"bench", "--tls-key-file", key}, "--tls-cert-file"},
		{serveArgs("--tls-cert-file", dir+"/missing", "--tls-key-file", key), "--tls-cert-file ("},
		{serveArgs("--tls-cert-file", cert), "--tls-key-file: required with --tls-cert-file"},
		{serveArgs("--tls-cert-file", cert, "--tls-key-file", key), "--peer-tls-ca-file: required"},
		{serveArgs("--tls-client-ca-file", junk), "--tls-client-ca-file: requires --tls-cert-file and --tls-key-file"},
	} {
		code, out := sluice(t, tc.args...)
		if code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("sluice %v: exit %d, want an error naming %s: %s", tc.args, code, tc.want, out)
		}
		if tc.args[0] == "serve" && configField.MatchString(out) {
			t.Errorf("sluice %v: the error names a Config field, not the flag: %s", tc.args, out)
		}
	}
}
