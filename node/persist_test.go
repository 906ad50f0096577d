package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// runNode starts a node and returns it with its stop: a graceful shutdown
// (cancel Run), or with crash a kill -9 (FaultCrash first: nothing more
// reaches its data directory).
func runNode(t *testing.T, mutate func(*node.Config)) (*node.Node, func(crash bool)) {
	t.Helper()
	cfg := node.LocalConfig("n1")
	mutate(&cfg)
	n, err := node.New(cfg)
	if err != nil {
		t.Fatalf("node.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	stopped := false
	stop := func(crash bool) {
		if stopped {
			return
		}
		stopped = true
		if crash {
			n.Inject(node.FaultCrash)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(func() { stop(false) })
	waitFor(t, 5*time.Second, "node ready", n.Ready)
	return n, stop
}

var daily = client.Limit{Limit: 100, Period: 24 * time.Hour, Algorithm: client.FixedWindow}

func remaining(t *testing.T, n *node.Node, key string) int64 {
	t.Helper()
	c := newClient(t, n.GRPCAddr())
	u, err := c.Usage(context.Background(), key, "", daily)
	if err != nil {
		t.Fatal(err)
	}
	return u.Remaining
}

func take(t *testing.T, n *node.Node, key string, cost int64) {
	t.Helper()
	c := newClient(t, n.GRPCAddr())
	res, err := c.Check(context.Background(), client.Item{Key: key, Limit: daily, Cost: cost})
	if err != nil || !res[0].Allowed {
		t.Fatalf("check %s cost %d: %+v, %v", key, cost, res, err)
	}
}

// A node restarted with the same --data-dir keeps a key at 60 of 100 per
// day; without --data-dir it starts afresh.
func TestDataDirKeepsCountsAcrossRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dataDir bool
		want    int64
	}{
		{"data dir", true, 40},
		{"none", false, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			dir := filepath.Join(t.TempDir(), "data")
			cfg := func(c *node.Config) {
				c.Clock = clk.Now
				if tc.dataDir {
					c.DataDir = dir
				}
			}
			n, stop := runNode(t, cfg)
			take(t, n, "plan:acme", 60)
			stop(false) // graceful: its last round is written
			n, _ = runNode(t, cfg)
			if got := remaining(t, n, "plan:acme"); got != tc.want {
				t.Fatalf("after a restart: %d of 100 left, want %d", got, tc.want)
			}
		})
	}
}

// A kill -9 (no final write) loses at most what the node admitted since
// the last batch the writer wrote: the 60 written before it survive.
func TestDataDirCrashLosesAtMostTheLastInterval(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	cfg := func(c *node.Config) {
		c.Clock = clk.Now
		c.DataDir = dir
		c.ReplicationInterval = 20 * time.Millisecond
	}
	n, stop := runNode(t, cfg)
	take(t, n, "plan:acme", 60)
	waitFor(t, 10*time.Second, "the 60 written", func() bool { w, _ := node.DiskStats(n); return w > 0 })
	take(t, n, "plan:acme", 5) // possibly lost with the crash
	stop(true)
	n, _ = runNode(t, cfg)
	if got := remaining(t, n, "plan:acme"); got != 40 && got != 35 {
		t.Fatalf("after a crash: %d of 100 left, want 40 (the last interval lost) or 35", got)
	}
}

// Bad --data-dir values fail node.New with an error naming DataDir.
func TestDataDirBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	held := t.TempDir()
	runNode(t, func(c *node.Config) { c.DataDir = held })
	for _, tc := range []struct {
		name, dir string
		interval  time.Duration
		want      error
	}{
		{"a file", file, 50 * time.Millisecond, nil},
		{"in use by a running node", held, 50 * time.Millisecond, nil},
		{"no interval", t.TempDir(), 0, node.ErrInvalidConfig},
	} {
		cfg := node.LocalConfig("n2")
		cfg.DataDir, cfg.ReplicationInterval, cfg.Replicas = tc.dir, tc.interval, 0
		n, err := node.New(cfg)
		if err == nil {
			n.Close()
			t.Errorf("%s: node.New succeeded", tc.name)
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if want := "ReplicationInterval"; tc.interval == 0 && !strings.Contains(err.Error(), want) || tc.interval != 0 && !strings.Contains(err.Error(), "DataDir") {
			t.Errorf("%s: %v does not name the field", tc.name, err)
		}
	}
}
