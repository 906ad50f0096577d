//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// keyMount is where a container finds its cluster secret file
// (SLUICE_CLUSTER_SECRET_FILE).
const keyMount = "/cluster.secret"

// writeGossipKey writes a file holding one new random 32-byte key: a
// cluster secret file, or a gossip key file.
// It is world-readable because docker cp gives it to root and the image
// runs as 65532 (a Kubernetes Secret volume uses fsGroup instead).
func writeGossipKey(t *testing.T, name string) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte("# "+name+"\n"+base64.StdEncoding.EncodeToString(b)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestE2EGossipEncryption: 3 containers with the same cluster secret form
// a cluster and answer checks, each logging the others joining; a 4th with
// another secret never joins, the members log its refused attempts, and
// the cluster stays at 3 members.
func TestE2EGossipEncryption(t *testing.T) {
	requireDocker(t)
	start := time.Now()
	c := newClusterOpts(t, 3, clusterOpts{name: "gk", keyFile: writeGossipKey(t, "cluster.keys")})
	t.Logf("encrypted cluster of 3 up in %v (prefix %s)", time.Since(start).Round(time.Millisecond), c.prefix)
	c.ensureHealthy(t, base...)

	// Checks are counted cluster-wide: 30 checks of a 10/h key over the 3
	// nodes admit exactly 10, which needs the ring that gossip built.
	lim := client.Limit{Limit: 10, Period: time.Hour}
	allowed := 0
	for i := range 30 {
		n := c.nodes[base[i%3]]
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := n.cli.Check(ctx, client.Item{Key: "gossip-key", Limit: lim})
		cancel()
		if err != nil {
			t.Fatalf("check %d via %s: %v", i, n.short, err)
		}
		if res[0].Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Fatalf("30 checks of a 10/h key over 3 nodes admitted %d, want 10", allowed)
	}

	intruder := c.addNodeWith(3, base, writeGossipKey(t, "wrong.keys"))
	deadline := time.Now().Add(60 * time.Second)
	for {
		logs, _ := docker("logs", intruder.name)
		// The first failed attempt is logged at info, the retries (every
		// second) at debug.
		if strings.Contains(logs, "cluster: join attempt failed") {
			if !strings.Contains(logs, "no installed keys could decrypt the message") {
				t.Fatalf("the intruder's joins failed for another reason:\n%s", logs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the intruder logged no failed join within 60s:\n%s", logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.waitMembers(3, c.names(base...), 5*time.Second); err != nil {
		t.Fatalf("after the intruder's attempts: %v", err)
	}
	got, err := c.members(intruder)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != intruder.name {
		t.Fatalf("the intruder sees %v, want itself alone", got)
	}
	if c.ready(intruder) {
		t.Fatal("the intruder reports ready without having joined")
	}
	logs, _ := docker("logs", c.nodes["n0"].name)
	for _, want := range []string{"cluster: member joined", "cluster: gossip refused: not encrypted with an accepted key"} {
		if !strings.Contains(logs, want) {
			t.Errorf("n0 did not log %q:\n%s", want, logs)
		}
	}
	t.Logf("the intruder was refused; members stay %v", c.names(base...))
}
