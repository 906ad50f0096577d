package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const (
	testKey1 = "9Xf0ZC3nBI4b1kRtJ6bH0QyR4mW8lV7o2sQz1aPq3nA="
	testKey2 = "Ds6ljEwq3bb1aD8j7mC2mA=="
)

// writeKeyFile replaces path with contents by a rename.
func writeKeyFile(t *testing.T, path, contents string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// A bad --gossip-key-file (or SLUICE_GOSSIP_KEY_FILE) stops `sluice serve`
// at once with the file and line.
func TestServeBadGossipKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gossip.keys")
	writeKeyFile(t, path, testKey1+"\nc2hvcnQ=\n")
	want := path + " line 2: key is 5 bytes, want 16, 24 or 32"
	for _, viaEnv := range []bool{false, true} {
		args := serveArgs()
		cmd := exec.Command(sluiceBin, args...)
		cmd.Env = os.Environ()
		if viaEnv {
			cmd.Env = append(cmd.Env, "SLUICE_GOSSIP_KEY_FILE="+path)
		} else {
			cmd.Args = append(cmd.Args, "--gossip-key-file", path)
		}
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Fatalf("env %v: err %v, output:\n%s\nwant exit 2 and %q", viaEnv, err, out, want)
		}
	}
}

// SIGHUP (or the file watch) reloads the gossip keyring of a running
// `sluice serve`; a bad file is logged and the keyring kept.
func TestServeReloadsGossipKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gossip.keys")
	writeKeyFile(t, path, testKey1+"\n")
	s := startServer(t, "--gossip-key-file", path)
	writeKeyFile(t, path, testKey1+"\n"+testKey2+"\n")
	_ = s.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the keyring reloaded", func() bool {
		return strings.Contains(s.stderr.String(), "cluster: gossip keyring reloaded")
	})
	writeKeyFile(t, path, "not a key\n")
	_ = s.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the bad file rejected", func() bool {
		return strings.Contains(s.stderr.String(), "gossip key file rejected; keeping the keyring in force")
	})
	if code, out := sluice(t, "members", "--addr", s.grpc); code != 0 {
		t.Fatalf("sluice members after a bad key file: exit %d\n%s", code, out)
	}
}
