package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A second `sluice serve --node-name a` joining a cluster whose live
// member a is elsewhere exits with an error naming the flag; the first
// keeps serving.
func TestServeRefusesTakenNodeName(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	a := startMember(t, "a")
	cmd := exec.Command(sluiceBin, "serve", "--node-name", "a", "--grpc-addr", freeAddr(t), "--http-addr", freeAddr(t),
		"--peer-addr", freeAddr(t), "--gossip-addr", freeAddr(t), "--join", a.gossip, "--cluster-secret-file", clusterSecretFile)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	var err error
	select {
	case err = <-done:
		done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatalf("the second node a still runs after 20s\nstderr:\n%s", stderr)
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want exit status 2\nstderr:\n%s", err, stderr)
	}
	want := `--node-name "a" is used by the live member at ` + a.gossip
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, stderr)
	}
	if ms := members(t, a); len(ms) != 1 || ms[0].GossipAddr != a.gossip {
		t.Fatalf("a lists %+v, want itself alone", ms)
	}
}
