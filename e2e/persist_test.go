//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// dataMount is where the nodes of TestPersistence keep their states
// (SLUICE_DATA_DIR).
const dataMount = "/data"

// makeDataDir makes dir in container name, owned by the image's user
// (65532), from a tar stream: the image is FROM scratch, with no shell to
// make it, and a file copied in from the host would be root's.
func makeDataDir(t *testing.T, name, dir string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: 0o700,
		Uid: 65532, Gid: 65532, ModTime: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "cp", "-", name+":/") // the tar's owner is kept
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker cp of %s into %s: %v: %s", dir, name, err, out)
	}
}

// metric returns the value of the sample named name in node n's /metrics.
func (c *cluster) metric(n *node, name string) (float64, error) {
	hc := http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", n.httpPort))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no sample %s in %s's metrics", name, n.short)
}

// waitSynced waits until node n reports (sluice_persist_last_write_age_seconds)
// that every change it made before since is on disk, synced.
func (c *cluster) waitSynced(t *testing.T, n *node, since time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		before := time.Now() // the age is reckoned at a later instant
		age, err := c.metric(n, "sluice_persist_last_write_age_seconds")
		if err == nil && before.Add(-time.Duration(age*float64(time.Second))).After(since) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not report its changes synced within 30s (age %v, %v)", n.short, age, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestPersistence: with --data-dir, a stop of all three nodes (docker stop,
// then docker kill) and a start keeps a key at 60 of 100 a day at 40
// left; a kill loses at most what changed after the last sync.
func TestPersistence(t *testing.T) {
	requireDocker(t)
	c := newClusterOpts(t, 3, clusterOpts{name: "persist", dataDir: dataMount,
		env: []string{"SLUICE_DATA_DIR=" + dataMount, "SLUICE_DATA_SYNC_INTERVAL=1s"}})
	names := c.names(base...)
	day := client.Limit{Limit: 100, Period: 24 * time.Hour} // a token bucket: 1 token back per 864 s
	cli := c.allClient(base...)
	// A take goes to the key's owner itself, so that it is charged there
	// and not answered from a token grant of another node.
	take := func(key string, cost int64) *node {
		t.Helper()
		owner := c.byName(owners(t, cli, []string{key}, day)[key])
		res, err := owner.cli.Check(context.Background(), client.Item{Key: key, Limit: day, Cost: cost})
		if err != nil || !res[0].Allowed || res[0].Source != "owner" {
			t.Fatalf("take %d of %s on %s: %+v, %v", cost, key, owner.short, res, err)
		}
		return owner
	}
	restart := func(how string, stop ...string) {
		t.Helper()
		start := time.Now()
		mustDocker(t, append(stop, names...)...)
		mustDocker(t, append([]string{"start"}, names...)...)
		c.ensureHealthy(t, base...)
		t.Logf("%s and start of all three: %v", how, time.Since(start).Round(time.Millisecond))
	}
	expect := func(when, key string, want ...int64) {
		t.Helper()
		for _, w := range want {
			bad, owners := checkRemaining(t, cli, []string{key}, day, w)
			if len(bad) == 0 {
				t.Logf("%s: %s has %d left (owner %v)", when, key, w, owners)
				return
			}
			if w == want[len(want)-1] {
				t.Fatalf("%s: %v, want %v left", when, bad, want)
			}
		}
	}

	// A graceful stop writes its last round: nothing is lost.
	owner := take("plan:stop", 60)
	t.Logf("plan:stop at 60 of 100 on %s", owner.short)
	restart("docker stop", "stop", "-t", "30")
	expect("after docker stop", "plan:stop", 40)

	// A kill loses at most what changed since the last sync: the 60,
	// reported synced, survive; the 5 taken after may not.
	owner = take("plan:kill", 60)
	c.waitSynced(t, owner, time.Now())
	take("plan:kill", 5)
	restart("docker kill", "kill")
	expect("after docker kill", "plan:kill", 35, 40)
	expect("after docker kill", "plan:stop", 40)
}
