package node_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/node"
)

// msgCounter is a slog.Handler that counts the records with one message.
type msgCounter struct {
	msg string
	n   *atomic.Int64
}

func (h msgCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h msgCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h msgCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h msgCounter) WithGroup(string) slog.Handler      { return h }

// gossipKey returns a random base64 AES-256 key.
func gossipKey(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// writeKeys replaces path with the keys, one per line, by a rename.
func writeKeys(t *testing.T, path string, keys ...string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestGossipEncryption: nodes built by node.New with the same
// --gossip-key-file form a cluster and answer checks; a node with another
// key never joins (and is never ready); SIGHUP (Reload) rotates the key and
// refuses a bad file, which the metrics count.
func TestGossipEncryption(t *testing.T) {
	k1, k2 := gossipKey(t), gossipKey(t)
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "n0.keys"), filepath.Join(dir, "n1.keys")}
	for _, f := range files {
		writeKeys(t, f, k1)
	}
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i, f := range files {
		tc.addWith([]string{"n0", "n1"}[i], func(c *node.Config) { c.GossipKeyFile = f })
	}
	tc.waitConverged()
	if got := metric(t, tc.nodes[0], "sluice_gossip_encrypted"); got != "1" {
		t.Fatalf("sluice_gossip_encrypted = %q, want 1", got)
	}

	var failed atomic.Int64
	wrong := filepath.Join(dir, "wrong.keys")
	writeKeys(t, wrong, k2)
	intruder := tc.addWith("intruder", func(c *node.Config) {
		c.GossipKeyFile = wrong
		c.Logger = slog.New(msgCounter{msg: "cluster: join attempt failed", n: &failed})
	})
	tc.nodes = tc.nodes[:2] // the intruder is not expected to converge
	waitFor(t, 10*time.Second, "the intruder's joins fail three times", func() bool { return failed.Load() >= 3 })
	if intruder.Ready() || len(intruder.Members()) != 1 {
		t.Fatalf("the intruder joined: ready %v, members %v", intruder.Ready(), intruder.Members())
	}
	for _, n := range tc.nodes {
		if got := len(n.Members()); got != 2 {
			t.Fatalf("%s lists %d members, want 2", n.Name(), got)
		}
	}
	tc.stops["intruder"]()

	// A bad file on SIGHUP: refused, counted, the keyring kept.
	writeKeys(t, files[0], k1, "AAAA")
	err := tc.nodes[0].Reload()
	if err == nil || !strings.Contains(err.Error(), files[0]+" line 2: key is 3 bytes") {
		t.Fatalf("Reload = %v, want an error naming %s line 2", err, files[0])
	}
	if got := metric(t, tc.nodes[0], `sluice_gossip_key_reloads_total{result="rejected"}`); got == "" || got == "0" {
		t.Fatalf(`rejected reloads = %q, want at least 1`, got)
	}
	// The rotation, by SIGHUP (the watch may apply it first: either way
	// Reload returns nil).
	for _, keys := range [][]string{{k1, k2}, {k2, k1}, {k2}} {
		for i, f := range files {
			writeKeys(t, f, keys...)
			if err := tc.nodes[i].Reload(); err != nil {
				t.Fatalf("Reload %v: %v", keys, err)
			}
		}
		if got := metric(t, tc.nodes[1], "sluice_gossip_keys"); got != strconv.Itoa(len(keys)) {
			t.Fatalf("sluice_gossip_keys = %q, want %d", got, len(keys))
		}
	}
	if got := metric(t, tc.nodes[1], `sluice_gossip_key_reloads_total{result="applied"}`); got != "3" {
		t.Fatalf(`applied reloads = %q, want 3`, got)
	}
	// Under key 2 alone, a node with key 2 joins.
	k2file := filepath.Join(dir, "n2.keys")
	writeKeys(t, k2file, k2)
	tc.addWith("n2", func(c *node.Config) { c.GossipKeyFile = k2file })
	tc.waitConverged()
}
