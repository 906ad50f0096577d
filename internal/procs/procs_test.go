package procs

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A process that exits: WaitTCP says so with its log's tail; Exited
// reports its exit status; Stop after the end is harmless.
func TestExitedProcess(t *testing.T) {
	p, err := Start(t.TempDir(), "quits", []string{"WORD=bye"}, "/bin/sh", "-c", `echo one; echo "$WORD"; exit 3`)
	if err != nil {
		t.Fatal(err)
	}
	ports, err := FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	err = WaitTCP(context.Background(), p, Loopback(ports[0]), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "quits exited") || !strings.Contains(err.Error(), "one\nbye") {
		t.Fatalf("WaitTCP: %v, want the exit with the log", err)
	}
	if done, werr := p.Exited(); !done || werr == nil || !strings.Contains(werr.Error(), "exit status 3") {
		t.Errorf("Exited() = %v, %v", done, werr)
	}
	if got := p.LogTail(1); got != "bye" {
		t.Errorf("LogTail(1) = %q", got)
	}
	p.Stop(time.Second)
}

// A process that listens: WaitTCP returns once it accepts, Stop ends it
// with SIGTERM; FreePorts are distinct.
func TestListeningProcess(t *testing.T) {
	ports, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	if ports[0] == ports[1] || ports[1] == ports[2] || ports[0] == ports[2] {
		t.Fatalf("ports %v are not distinct", ports)
	}
	ln, err := net.Listen("tcp", Loopback(ports[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, err := Start(t.TempDir(), "sleeps", nil, "/bin/sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitTCP(context.Background(), p, ln.Addr().String(), 10*time.Second); err != nil {
		t.Fatalf("WaitTCP on a listener: %v", err)
	}
	p.Stop(10 * time.Second)
	if done, werr := p.Exited(); !done || werr == nil || !strings.Contains(werr.Error(), "terminated") {
		t.Errorf("after Stop: Exited() = %v, %v, want killed by SIGTERM", done, werr)
	}
	if got := RedisArgs(6379, "/d"); strings.Join(got, " ") != "--save  --appendonly no --port 6379 --bind 127.0.0.1 --dir /d" {
		t.Errorf("RedisArgs = %q", got)
	}
}
