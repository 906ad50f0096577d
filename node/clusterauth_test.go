package node_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// A node with a Join list and no cluster authentication does not start;
// its error names every way to get one, and the opt-out.
func TestJoinWithoutClusterAuthRefused(t *testing.T) {
	cfg := node.LocalConfig("n0")
	cfg.Join = []string{"127.0.0.1:1"}
	_, err := node.New(cfg)
	if !errors.Is(err, node.ErrNoClusterAuth) || !errors.Is(err, node.ErrInvalidConfig) {
		t.Fatalf("New with Join and no authentication: %v, want ErrNoClusterAuth", err)
	}
	for _, want := range []string{"ClusterSecretFile", "SLUICE_CLUSTER_SECRET_FILE", "PeerTLSCertFile", "Insecure"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %s", err, want)
		}
	}
}

// Settings that contradict each other are errors naming the field.
func TestClusterAuthBadCombinations(t *testing.T) {
	secret := writeSecret(t, t.TempDir())
	for _, c := range []struct {
		name, field string
		mutate      func(*node.Config)
	}{
		{"insecure with a secret", "Insecure", func(c *node.Config) { c.Insecure, c.ClusterSecretFile = true, secret }},
		{"secret with a gossip key file", "ClusterSecretFile", func(c *node.Config) { c.ClusterSecretFile, c.GossipKeyFile = secret, secret }},
		{"secret file missing", "ClusterSecretFile", func(c *node.Config) { c.ClusterSecretFile = secret + ".missing" }},
		{"secret file bad", "ClusterSecretFile", func(c *node.Config) { c.ClusterSecretFile = writeTempFile(t, "short", "c2hvcnQ=\n") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := node.LocalConfig("n0")
			c.mutate(&cfg)
			n, err := node.New(cfg)
			if err == nil {
				n.Close()
				t.Fatal("New: no error")
			}
			if !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field+":") {
				t.Fatalf("New: %v, want ErrInvalidConfig naming %s", err, c.field)
			}
		})
	}
}

func writeTempFile(t *testing.T, name, contents string) string {
	t.Helper()
	path := t.TempDir() + "/" + name
	if err := os.WriteFile(path, []byte(contents), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A node with no Join list and no cluster authentication (the
// quickstart) is a cluster of one: its peer and gossip listeners are on
// loopback whatever the configured host, and a node that tries to join it
// is refused, the refusal counted.
func TestNodeAloneRefusesMembers(t *testing.T) {
	var infos atomic.Int64
	alone := startNode(t, func(c *node.Config) {
		c.PeerAddr, c.GossipAddr = ":0", ":0"
		c.Logger = slog.New(msgCounter{msg: "cluster: a cluster of one: no cluster secret, so the peer and gossip ports listen on loopback only and other nodes are refused; to cluster, give every node the same --cluster-secret-file (openssl rand -base64 32) and --join", n: &infos})
	})
	for what, addr := range map[string]string{"peer": alone.PeerAddr(), "gossip": alone.GossipAddr()} {
		if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
			t.Errorf("the %s listener of a node alone is on %s, want 127.0.0.1", what, addr)
		}
	}
	if infos.Load() != 1 {
		t.Errorf("the cluster-of-one line was logged %d times, want 1", infos.Load())
	}
	var failed atomic.Int64
	intruder := startNodeNotReady(t, func(c *node.Config) {
		c.NodeName, c.Insecure, c.Join = "intruder", true, []string{alone.GossipAddr()}
		c.Logger = slog.New(msgCounter{msg: "cluster: join attempt failed", n: &failed})
	})
	waitFor(t, 10*time.Second, "the intruder's joins fail three times", func() bool { return failed.Load() >= 3 })
	if got := metric(t, alone, `sluice_gossip_refused_total{reason="alone"}`); got == "" || got == "0" {
		t.Fatalf(`sluice_gossip_refused_total{reason="alone"} = %q, want > 0`, got)
	}
	if len(alone.Members()) != 1 || len(intruder.Members()) != 1 {
		t.Fatalf("members: alone %v, intruder %v; want each alone", alone.Members(), intruder.Members())
	}
	if got := metric(t, alone, "sluice_insecure"); got != "0" {
		t.Fatalf("sluice_insecure of a node alone = %q, want 0", got)
	}
	if got := metric(t, intruder, "sluice_insecure"); got != "1" {
		t.Fatalf("sluice_insecure with Insecure = %q, want 1", got)
	}
}

// startNodeNotReady is startNode without waiting for readiness (a node
// whose join does not succeed is not ready).
func startNodeNotReady(t *testing.T, mutate func(*node.Config)) *node.Node {
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
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return n
}

// Nodes with one cluster secret form a cluster; a node with another
// secret neither joins (its gossip is refused and counted) nor reaches
// the peer service (the TLS handshake refuses it, and a plaintext caller
// too). The secret then rotates in place, without a restart, and a node
// with only the new secret joins.
func TestClusterSecret(t *testing.T) {
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	tc.add("n0")
	tc.add("n1")
	tc.waitConverged()
	n0 := tc.nodes[0]

	var failed atomic.Int64
	other := writeSecret(t, t.TempDir())
	intruder := tc.addWith("intruder", func(c *node.Config) {
		c.ClusterSecretFile = other
		c.Logger = slog.New(msgCounter{msg: "cluster: join attempt failed", n: &failed})
	})
	tc.nodes = tc.nodes[:2]
	waitFor(t, 10*time.Second, "the intruder's joins fail three times", func() bool { return failed.Load() >= 3 })
	if len(intruder.Members()) != 1 || len(n0.Members()) != 2 {
		t.Fatalf("members: intruder %v, n0 %v", intruder.Members(), n0.Members())
	}
	if got := metric(t, n0, `sluice_gossip_refused_total{reason="key"}`); got == "" || got == "0" {
		t.Fatalf(`sluice_gossip_refused_total{reason="key"} = %q, want > 0`, got)
	}
	// A plaintext peer call, as any caller that names a member would make.
	conn, err := grpc.NewClient(n0.PeerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := sluicev1.NewPeerClient(conn).Fetch(ctx, &sluicev1.FetchRequest{From: "n1"}); err == nil {
		t.Fatal("a plaintext Peer.Fetch naming a member was answered")
	}
	tc.stops["intruder"]()

	// Rotation: add the new secret, make it the primary, drop the old.
	old, err := os.ReadFile(tc.secret)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	next := base64.StdEncoding.EncodeToString(b)
	for _, lines := range []string{string(old) + next, next + "\n" + string(old), next} {
		if err := os.WriteFile(tc.secret, []byte(lines+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, n := range tc.nodes {
			if err := n.Reload(); err != nil {
				t.Fatalf("Reload: %v", err)
			}
		}
	}
	if got := metric(t, n0, `sluice_cluster_secret_reloads_total{result="applied"}`); got != "3" {
		t.Fatalf(`applied reloads = %q, want 3`, got)
	}
	fresh := writeTempFile(t, "next.secret", next+"\n")
	tc.addWith("n2", func(c *node.Config) { c.ClusterSecretFile = fresh })
	tc.waitConverged()
}
