package node_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/node"
)

// testCluster is a set of in-process nodes built by node.New, on :0 ports,
// sharing one fake clock.
type testCluster struct {
	t     *testing.T
	clk   *fakeClock
	nodes []*node.Node
	stops map[string]func()
	seed  string
	// secret is the cluster secret file of the nodes that bring no
	// cluster authentication of their own (written at the first add).
	secret string
}

func newTestCluster(t *testing.T, size int) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i := 0; i < size; i++ {
		tc.add(fmt.Sprintf("n%d", i))
	}
	tc.waitConverged()
	return tc
}

// add starts one more node that joins the first.
func (tc *testCluster) add(name string) *node.Node {
	tc.t.Helper()
	return tc.addWith(name, nil)
}

// addWith is add with a change to the node's config.
func (tc *testCluster) addWith(name string, mutate func(*node.Config)) *node.Node {
	tc.t.Helper()
	cfg := node.LocalConfig(name)
	if mutate != nil {
		mutate(&cfg)
	}
	if cfg.Clock == nil { // a test may ask for the real clock
		cfg.Clock = tc.clk.Now
	}
	tc.authenticate(&cfg)
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
	}
	if tc.seed != "" && cfg.Join == nil {
		cfg.Join = []string{tc.seed}
	}
	n, err := node.New(cfg)
	if err != nil {
		tc.t.Fatalf("node.New(%s): %v", name, err)
	}
	if tc.seed == "" {
		tc.seed = n.GossipAddr()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stopWith := func(teardown bool) {
		once.Do(func() {
			cancel()
			err := <-done
			switch {
			case err == nil:
			case teardown && errors.Is(err, limiter.ErrPeerUnavailable):
				// The test is over and the others are stopping too: a
				// handoff to one that has gone already is not a failure.
				tc.t.Logf("%s: Run at teardown: %v", name, err)
			default:
				tc.t.Errorf("%s: Run: %v", name, err)
			}
		})
	}
	stop := func() { stopWith(false) }
	tc.stops[name] = stop
	tc.t.Cleanup(func() { stopWith(true) })
	tc.nodes = append(tc.nodes, n)
	return n
}

// authenticate gives cfg the cluster's secret unless it has peer mTLS or
// Insecure; one with a gossip key file (which the secret replaces) runs
// Insecure.
func (tc *testCluster) authenticate(cfg *node.Config) {
	switch {
	case cfg.ClusterSecretFile != "" || cfg.Insecure || cfg.PeerTLSCertFile != "" || cfg.TLSCertFile != "":
	case cfg.GossipKeyFile != "":
		cfg.Insecure = true
	default:
		if tc.secret == "" {
			tc.secret = writeSecret(tc.t, tc.t.TempDir())
		}
		cfg.ClusterSecretFile = tc.secret
	}
}

// writeSecret writes a new cluster secret file in dir and returns its path.
func writeSecret(t testing.TB, dir string) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cluster.secret")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// stop shuts one node down gracefully and drops it from the cluster list.
func (tc *testCluster) stop(name string) {
	tc.t.Helper()
	tc.stops[name]()
	for i, n := range tc.nodes {
		if n.Name() == name {
			tc.nodes = append(tc.nodes[:i], tc.nodes[i+1:]...)
			break
		}
	}
	tc.waitConverged()
}

// waitConverged waits until every node is ready and its ring lists exactly
// the cluster's nodes.
func (tc *testCluster) waitConverged() {
	tc.t.Helper()
	want := len(tc.nodes)
	waitFor(tc.t, 15*time.Second, fmt.Sprintf("%d nodes converged", want), func() bool {
		for _, n := range tc.nodes {
			r := n.Limiter().Ring()
			if !n.Ready() || r == nil || r.Len() != want {
				return false
			}
			for _, o := range tc.nodes {
				if _, ok := r.Member(o.Name()); !ok {
					return false
				}
			}
		}
		return true
	})
}

func (tc *testCluster) clients() []*client.Client {
	cs := make([]*client.Client, len(tc.nodes))
	for i, n := range tc.nodes {
		cs[i] = newClient(tc.t, n.GRPCAddr())
	}
	return cs
}

// ownerOf names the node that owns key under lim, by asking with cost 0.
func ownerOf(t *testing.T, c *client.Client, key string, lim client.Limit) client.Result {
	t.Helper()
	res, err := c.Usage(context.Background(), key, "", lim)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err != nil {
		t.Fatalf("usage %s: %v", key, res.Err)
	}
	return res
}

func TestClusterConverges(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			tc := newTestCluster(t, size)
			for _, n := range tc.nodes {
				ms := n.Members()
				if len(ms) != size {
					t.Fatalf("%s lists %d members, want %d", n.Name(), len(ms), size)
				}
				var share float64
				for _, m := range ms {
					if m.GRPCAddr == "" || m.State != "alive" {
						t.Fatalf("%s: member %+v lacks an address or is not alive", n.Name(), m)
					}
					share += m.RingShare
				}
				if share < 0.999 || share > 1.001 {
					t.Fatalf("%s: ring shares sum to %f", n.Name(), share)
				}
			}
		})
	}
}

// Checks of one key sent through every node admit exactly its limit.
func TestClusterAdmitsExactlyTheLimit(t *testing.T) {
	tc := newTestCluster(t, 3)
	cs := tc.clients()
	lim := client.Limit{Limit: 100, Period: time.Hour}
	allowed := 0
	owners := map[string]bool{}
	for i := 0; i < 300; i++ {
		res, err := cs[i%3].Check(context.Background(), client.Item{Key: "one-key", Limit: lim})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Err != nil {
			t.Fatalf("check %d: %v", i, res[0].Err)
		}
		if res[0].Allowed {
			allowed++
		}
		owners[res[0].Owner] = true
	}
	if allowed != 100 {
		t.Fatalf("allowed %d of 300, want exactly 100", allowed)
	}
	if len(owners) != 1 {
		t.Fatalf("answers named owners %v, want one", owners)
	}
}

// 1,000 concurrent checks through all nodes give the exact count when
// every check is decided by the owner (node grants off). With grants on
// (the default), admission never exceeds the limit, and may fall short of
// it by the tokens still held in unexpired grants when the checks stop
// (grant.go); under load that was 10 of 500.
func TestClusterConcurrentChecksExact(t *testing.T) {
	for _, grants := range []bool{false, true} {
		t.Run(fmt.Sprintf("grants %v", grants), func(t *testing.T) {
			tc := newTestCluster0(t, 3, func(c *node.Config) {
				if !grants {
					c.Grants.Threshold = -1
				}
			})
			allowed, failed := concurrentChecks(tc)
			if failed != 0 || allowed > 500 || (!grants && allowed != 500) {
				t.Fatalf("allowed %d, failed %d of 1000; want %s 500 allowed and none failed", allowed, failed, map[bool]string{false: "exactly", true: "at most"}[grants])
			}
			t.Logf("allowed %d of 1000 for a limit of 500", allowed)
		})
	}
}

// concurrentChecks sends 1,000 checks of one key (500 an hour) from 100
// callers through every node of tc and counts the allowed and failed.
func concurrentChecks(tc *testCluster) (int64, int64) {
	cs := tc.clients()
	lim := client.Limit{Limit: 500, Period: time.Hour}
	var allowed, failed atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 100; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				res, err := cs[(w+i)%3].Check(context.Background(), client.Item{Key: "busy", Limit: lim})
				if err != nil || res[0].Err != nil {
					failed.Add(1)
					continue
				}
				if res[0].Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return allowed.Load(), failed.Load()
}

// spend brings each key to 60/100 and returns the keys by owner.
func spend(t *testing.T, c *client.Client, keys []string, lim client.Limit) map[string][]string {
	t.Helper()
	byOwner := map[string][]string{}
	for _, k := range keys {
		res, err := c.Check(context.Background(), client.Item{Key: k, Limit: lim, Cost: 60})
		if err != nil || !res[0].Allowed || res[0].Remaining != 40 {
			t.Fatalf("spend %s: %+v %v", k, res, err)
		}
		byOwner[res[0].Owner] = append(byOwner[res[0].Owner], k)
	}
	return byOwner
}

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("acct:%d", i)
	}
	return ks
}

// A node that leaves hands its keys and their counters to the new owners.
func TestClusterLeaveMovesCounters(t *testing.T) {
	tc := newTestCluster(t, 3)
	lim := client.Limit{Limit: 100, Period: time.Hour}
	ks := keys(60)
	byOwner := spend(t, newClient(t, tc.nodes[0].GRPCAddr()), ks, lim)
	leaving := tc.nodes[2].Name()
	if len(byOwner[leaving]) == 0 {
		t.Fatalf("%s owns none of %d keys: %v", leaving, len(ks), byOwner)
	}
	tc.stop(leaving)
	c := newClient(t, tc.nodes[0].GRPCAddr())
	for _, k := range ks {
		res := ownerOf(t, c, k, lim)
		if res.Owner == leaving {
			t.Fatalf("%s still owned by the node that left", k)
		}
		if res.Remaining != 40 {
			t.Errorf("%s (was on %v): remaining %d after the leave, want 40", k, res.Owner, res.Remaining)
		}
	}
}

// A node that joins takes its share of the keys and keeps their counters.
func TestClusterJoinKeepsCounters(t *testing.T) {
	tc := newTestCluster(t, 3)
	lim := client.Limit{Limit: 100, Period: time.Hour}
	ks := keys(200)
	spend(t, newClient(t, tc.nodes[0].GRPCAddr()), ks, lim)
	joined := tc.add("n3")
	tc.waitConverged()
	c := newClient(t, tc.nodes[1].GRPCAddr())
	taken := 0
	for _, k := range ks {
		res := ownerOf(t, c, k, lim)
		if res.Owner == joined.Name() {
			taken++
		}
		if res.Remaining != 40 {
			t.Errorf("%s on %s: remaining %d after the join, want 40", k, res.Owner, res.Remaining)
		}
	}
	if taken < 25 || taken > 80 {
		t.Fatalf("the new node took %d of %d keys, want about a quarter", taken, len(ks))
	}
}

// Two nodes that leave at the same time hand their keys to the nodes that
// stay, not to each other.
func TestClusterTwoLeaveTogether(t *testing.T) {
	tc := newTestCluster(t, 5)
	lim := client.Limit{Limit: 100, Period: time.Hour}
	ks := keys(80)
	byOwner := spend(t, newClient(t, tc.nodes[0].GRPCAddr()), ks, lim)
	a, b := tc.nodes[3].Name(), tc.nodes[4].Name()
	if len(byOwner[a])+len(byOwner[b]) == 0 {
		t.Fatalf("the leaving nodes own none of the keys: %v", byOwner)
	}
	var wg sync.WaitGroup
	for _, name := range []string{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); tc.stops[name]() }()
	}
	wg.Wait()
	tc.nodes = tc.nodes[:3]
	tc.waitConverged()
	c := newClient(t, tc.nodes[0].GRPCAddr())
	for _, k := range ks {
		if res := ownerOf(t, c, k, lim); res.Remaining != 40 {
			was := ""
			for o, owned := range byOwner {
				if slices.Contains(owned, k) {
					was = o
				}
			}
			t.Errorf("%s (was on %s) on %s: remaining %d after two nodes left, want 40", k, was, res.Owner, res.Remaining)
		}
	}
}
