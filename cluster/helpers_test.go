package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

// testNode is a Cluster running under test, with the snapshots its
// OnChange received and the messages its logger saw.
type testNode struct {
	*cluster.Cluster
	logs *recorder

	cancel context.CancelFunc
	runErr chan error

	mu    sync.Mutex
	snaps []cluster.Snapshot
}

// newNode creates a Cluster from cfg (OnChange and Logger are replaced)
// without running it; stop is registered as a cleanup.
func newNode(t *testing.T, cfg cluster.Config) *testNode {
	t.Helper()
	n := &testNode{logs: newRecorder(cfg.NodeName)}
	cfg.OnChange = func(s cluster.Snapshot) {
		n.mu.Lock()
		n.snaps = append(n.snaps, s)
		n.mu.Unlock()
	}
	cfg.Logger = slog.New(n.logs)
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.NodeName, err)
	}
	n.Cluster = c
	t.Cleanup(n.stop)
	return n
}

// startNode creates a Cluster from cfg and runs it.
func startNode(t *testing.T, cfg cluster.Config) *testNode {
	t.Helper()
	n := newNode(t, cfg)
	n.run()
	return n
}

// run starts Run in a goroutine.
func (n *testNode) run() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.runErr = make(chan error, 1)
	go func() { n.runErr <- n.Run(ctx) }()
}

// stop cancels Run, waits for it and shuts the Cluster down. Idempotent.
func (n *testNode) stop() {
	if n.cancel != nil {
		n.cancel()
		if err := <-n.runErr; err != nil {
			panic(fmt.Sprintf("Run(%s) returned %v", n.LocalName(), err))
		}
		n.cancel = nil
	}
	if err := n.Shutdown(); err != nil {
		panic(err)
	}
}

// received returns a copy of the snapshots OnChange received so far.
func (n *testNode) received() []cluster.Snapshot {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.snaps)
}

// waitFor polls cond every 10ms until it holds or timeout passes, and
// returns how long it took.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// converged reports whether every node's snapshot lists exactly the given
// nodes, with their gossip addresses and metadata.
func converged(all []*testNode, want []*testNode, meta map[string]cluster.NodeMeta) bool {
	for _, n := range all {
		s := n.Snapshot()
		if len(s.Members) != len(want) {
			return false
		}
		for _, w := range want {
			m, ok := s.Member(w.LocalName())
			if !ok || m.GossipAddr != w.GossipAddr() || m.State != cluster.Alive {
				return false
			}
			if wm, ok := meta[m.Name]; ok && (m.GRPCAddr != wm.GRPCAddr || m.PeerAddr != wm.PeerAddr || m.Version != wm.Version || m.PolicyHash != wm.PolicyHash) {
				return false
			}
		}
	}
	return true
}

// listed reports whether every node's snapshot lists exactly the given
// nodes, at their gossip addresses, in any state: unlike converged, a
// member this node suspects (its probes unanswered for a moment, as on a
// starved machine) counts.
func listed(all []*testNode, want []*testNode) bool {
	for _, n := range all {
		s := n.Snapshot()
		if len(s.Members) != len(want) {
			return false
		}
		for _, w := range want {
			if m, ok := s.Member(w.LocalName()); !ok || m.GossipAddr != w.GossipAddr() {
				return false
			}
		}
	}
	return true
}

// localConfig is LocalConfig with faster join retries.
func localConfig(name string, join ...string) cluster.Config {
	cfg := cluster.LocalConfig(name)
	cfg.Join = join
	cfg.JoinRetry = 50 * time.Millisecond
	return cfg
}

// reservePort returns a loopback port that was free a moment ago.
func reservePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// recorder is a slog.Handler that counts messages, and prints them to
// stderr when CLUSTER_TEST_LOG is set.
type recorder struct {
	name   string
	print  bool
	mu     *sync.Mutex
	counts map[string]int
	attrs  []slog.Attr
}

func newRecorder(name string) *recorder {
	return &recorder{name: name, print: os.Getenv("CLUSTER_TEST_LOG") != "", mu: new(sync.Mutex), counts: map[string]int{}}
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.counts[rec.Message]++
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "member" {
			r.counts[rec.Message+" "+a.Value.String()]++
		}
		return true
	})
	r.mu.Unlock()
	if r.print {
		line := fmt.Sprintf("%s %s %-5s %s", rec.Time.Format("15:04:05.000"), r.name, rec.Level, rec.Message)
		rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		fmt.Fprintln(os.Stderr, line)
	}
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(slices.Clone(r.attrs), as...)
	return &c
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

// count returns how many records had the message msg, or, given
// "msg name", the message msg and the attribute member=name.
func (r *recorder) count(msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[msg]
}

func netSplit(hostport string) (host, port string, err error) { return net.SplitHostPort(hostport) }
