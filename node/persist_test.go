package node_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
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
		c.DataSyncInterval = 20 * time.Millisecond
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
		name, dir      string
		interval, sync time.Duration
		want           error
		field          string
	}{
		{"a file", file, 50 * time.Millisecond, time.Second, nil, "DataDir"},
		{"in use by a running node", held, 50 * time.Millisecond, time.Second, nil, "DataDir"},
		{"no interval", t.TempDir(), 0, time.Second, node.ErrInvalidConfig, "ReplicationInterval"},
		{"no sync interval", t.TempDir(), 50 * time.Millisecond, 0, node.ErrInvalidConfig, "DataSyncInterval"},
		{"negative sync interval", t.TempDir(), 50 * time.Millisecond, -time.Second, node.ErrInvalidConfig, "DataSyncInterval"},
		{"sync interval over an hour", t.TempDir(), 50 * time.Millisecond, 61 * time.Minute, node.ErrInvalidConfig, "DataSyncInterval"},
	} {
		cfg := node.LocalConfig("n2")
		cfg.DataDir, cfg.ReplicationInterval, cfg.DataSyncInterval, cfg.Replicas = tc.dir, tc.interval, tc.sync, 0
		n, err := node.New(cfg)
		if err == nil {
			n.Close()
			t.Errorf("%s: node.New succeeded", tc.name)
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v does not name %s", tc.name, err, tc.field)
		}
	}
	// Without DataDir the sync interval is not used.
	cfg := node.LocalConfig("n3")
	cfg.DataSyncInterval = 0
	if n, err := node.New(cfg); err != nil {
		t.Errorf("no DataDir, no sync interval: %v", err)
	} else {
		n.Close()
	}
}

// The writer's metrics: what waits, how old the newest synced instant is,
// what was written and how long writes take.
func TestDataDirMetrics(t *testing.T) {
	clk := newFakeClock()
	n, _ := runNode(t, func(c *node.Config) {
		c.Clock = clk.Now
		c.DataDir = t.TempDir()
		c.DataSyncInterval = 20 * time.Millisecond
	})
	take(t, n, "plan:acme", 60)
	after := time.Now()
	waitFor(t, 10*time.Second, "the take written and synced", func() bool {
		before := time.Now() // the scrape's age is from a later instant
		lines := scrape(t, n)
		age, err := strconv.ParseFloat(sample(lines, "sluice_persist_last_write_age_seconds"), 64)
		return err == nil && before.Add(-time.Duration(age*1e9)).After(after) &&
			sample(lines, "sluice_persist_states_written_total") == "1"
	})
	lines := scrape(t, n)
	for name, want := range map[string]string{
		"sluice_persist_pending_states":      "0",
		"sluice_persist_states_failed_total": "0",
		"sluice_persist_full_waits_total":    "0",
		"sluice_persist_write_seconds_count": "1",
	} {
		if got := sample(lines, name); got != want {
			t.Errorf("%s = %q, want %s", name, got, want)
		}
	}
}
