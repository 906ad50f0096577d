package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe to write from the process's copier
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sluiceBin is the binary built once for the process-level tests.
var sluiceBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sluiceBin = filepath.Join(dir, "sluice")
	clusterSecretFile = filepath.Join(dir, "cluster.secret")
	if err := os.WriteFile(clusterSecretFile, []byte(testClusterSecret+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out, err := exec.Command("go", "build", "-o", sluiceBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testClusterSecret is the cluster secret of the servers the tests start
// (in clusterSecretFile, given by SLUICE_CLUSTER_SECRET_FILE) unless they
// bring their own cluster authentication.
const testClusterSecret = "q4TbHn0LrJ0r3m6cX8Z2kq0y1m4VJdUuW3fHcN7aPz8="

// clusterSecretFile holds testClusterSecret; written by TestMain.
var clusterSecretFile string

// freeAddr returns a loopback address with a port that was free a moment ago.
//
// The port is drawn below Linux's ephemeral range (32768 up), where the
// kernel gives no outgoing connection a port: a port of :0 is free when
// drawn but may be any connection's by the time a process binds it (CI saw
// a gossip port taken so). It must be free for TCP and UDP (memberlist
// binds both).
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range in 200 draws")
	return ""
}

// server is a `sluice serve` process.
type server struct {
	cmd        *exec.Cmd
	grpc, http string
	peer       string // the --peer-addr it was given
	gossip     string // the --gossip-addr it was given, if any
	stderr     *lockedBuffer
	exited     chan struct{} // closed when the process has exited
	waitErr    error
}

// startServer starts `sluice serve` with the given extra args; the HTTP
// address is passed through its environment twin to exercise that path.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	return startServerNamed(t, "p1", append([]string{"--gossip-addr", "127.0.0.1:0"}, args...)...)
}

// startServerNamed starts `sluice serve` as node name. Its ports are
// picked free just before the process binds them, so another test may take
// one in between: a start that fails with "address already in use" is tried
// again on new ports (a --gossip-addr in args included; the server's gossip
// field is the one it got).
func startServerNamed(t *testing.T, name string, args ...string) *server {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s, inUse := launch(t, name, args, attempt > 1)
		if !inUse {
			return s
		}
		if attempt == 5 {
			t.Fatalf("%s: ports in use on 5 attempts\nstderr:\n%s", name, s.stderr)
		}
		t.Logf("%s: a port was taken before the server bound it; trying new ports", name)
	}
}

// launch starts one attempt of startServerNamed and waits until it serves;
// inUse reports a start that failed because a port was taken. A retry
// picks a new --gossip-addr too, unless it is 127.0.0.1:0.
func launch(t *testing.T, name string, args []string, retry bool) (s *server, inUse bool) {
	t.Helper()
	args = slices.Clone(args)
	s = &server{grpc: freeAddr(t), http: freeAddr(t), stderr: &lockedBuffer{}, exited: make(chan struct{})}
	peer := freeAddr(t)
	for peer == s.grpc || peer == s.http {
		peer = freeAddr(t)
	}
	if i := slices.Index(args, "--gossip-addr"); i >= 0 && i+1 < len(args) {
		if retry && args[i+1] != "127.0.0.1:0" {
			args[i+1] = freeAddr(t)
		}
		s.gossip = args[i+1]
	}
	s.peer = peer
	s.cmd = exec.Command(sluiceBin, append([]string{"serve", "--node-name", name, "--grpc-addr", s.grpc, "--peer-addr", peer}, args...)...)
	s.cmd.Env = append(os.Environ(), "SLUICE_HTTP_ADDR="+s.http)
	if !slices.ContainsFunc(args, func(a string) bool {
		return slices.Contains([]string{"--insecure", "--cluster-secret-file", "--peer-tls-cert-file", "--tls-cert-file", "--gossip-key-file"}, a)
	}) {
		s.cmd.Env = append(s.cmd.Env, "SLUICE_CLUSTER_SECRET_FILE="+clusterSecretFile)
	}
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, s.stderr)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.exited:
			if strings.Contains(s.stderr.String(), "address already in use") {
				return s, true
			}
		default:
		}
		if slices.Contains(args, "--tls-cert-file") {
			// /readyz is behind TLS (and mTLS): wait for the log line.
			if strings.Contains(s.stderr.String(), "sluice node serving") {
				return s, false
			}
			if time.Now().After(deadline) {
				t.Fatalf("server not serving after 10s\nstderr:\n%s", s.stderr)
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		resp, err := http.Get("http://" + s.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, false
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready after 10s: %v\nstderr:\n%s", err, s.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveArgs is `sluice serve` with args, on ephemeral loopback ports for
// all four listeners: a test never binds a default port (8080-8082, 7946),
// which a node of the quickstart (`make run`) may hold.
func serveArgs(args ...string) []string {
	return append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--peer-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, args...)
}

// sluice runs the CLI and returns its exit code and output.
func sluice(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("run sluice %v: %v", args, err)
	}
	return 0, string(out)
}

// Twelve runs of `sluice check` with --limit 10 --period 1h: ten exit 0,
// then exit 1 with the retry-after printed. SIGTERM then stops the server
// cleanly.
func TestCheckTwelveTimes(t *testing.T) {
	s := startServer(t)
	for i := 1; i <= 12; i++ {
		code, out := sluice(t, "check", "--addr", s.grpc, "cli:new-key", "--limit", "10", "--period", "1h")
		want := 0
		if i > 10 {
			want = 1
		}
		if code != want {
			t.Fatalf("run %d: exit %d, want %d; output: %s", i, code, want, out)
		}
		if want == 1 && !strings.Contains(out, "retry after") {
			t.Fatalf("run %d: output lacks the retry-after: %s", i, out)
		}
	}
	code, out := sluice(t, "usage", "--addr", s.grpc, "cli:new-key", "--limit", "10", "--period", "1h", "--json")
	// A read at 0 remaining is not "allowed": the next check of 1 is not.
	if code != 0 || !strings.Contains(out, `"remaining":0`) || !strings.Contains(out, `"allowed":false`) {
		t.Fatalf("usage: exit %d, output %s; want remaining 0, allowed false", code, out)
	}
	code, out = sluice(t, "usage", "--addr", s.grpc, "cli:new-key", "--limit", "10", "--period", "1h")
	if code != 0 || !strings.Contains(out, "remaining 0 (a check of 1 would be denied)") {
		t.Fatalf("usage: exit %d, output %s", code, out)
	}
	// Bad input exits 2 and names the field.
	code, out = sluice(t, "check", "--addr", s.grpc, "k", "--limit", "-1", "--period", "1h")
	if code != 2 || !strings.Contains(out, "limit") {
		t.Fatalf("limit -1: exit %d, output %s", code, out)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
		if s.waitErr != nil {
			t.Fatalf("after SIGTERM: %v\nstderr:\n%s", s.waitErr, s.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("no exit 15s after SIGTERM\nstderr:\n%s", s.stderr)
	}
}

// SIGHUP reloads the policy file; a bad file keeps the old policies.
func TestSighupReloadsPolicies(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("policies:\n  small:\n    limit: 1\n    period: 1h\n")
	s := startServer(t, "--config", file)
	checkPolicy := func(key, pol string) int {
		code, _ := sluice(t, "check", "--addr", s.grpc, key, "--policy", pol)
		return code
	}
	if c := checkPolicy("a", "small"); c != 0 {
		t.Fatalf("first check under small: exit %d", c)
	}
	if c := checkPolicy("a", "small"); c != 1 {
		t.Fatalf("second check under small: exit %d, want 1", c)
	}
	if c := checkPolicy("a", "big"); c != 2 {
		t.Fatalf("unknown policy big: exit %d, want 2", c)
	}
	write("policies:\n  small:\n    limit: 1\n    period: 1h\n  big:\n    limit: 100\n    period: 1h\n")
	_ = s.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "policy big loaded", func() bool { return checkPolicy("b", "big") == 0 })
	write("policies:\n  big:\n    limit: -5\n")
	_ = s.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "reload failure logged", func() bool { return strings.Contains(s.stderr.String(), "keeping the old policies") })
	if c := checkPolicy("c", "big"); c != 0 {
		t.Fatalf("after a bad reload, policy big: exit %d, want 0 (old policies kept)", c)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
