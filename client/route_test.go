package client_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is a set of real nodes (node.New, as in production) on :0 ports.
type cluster struct {
	t     testing.TB
	seed  string
	nodes []*node.Node
	stops map[string]func()
	// secret is the nodes' cluster secret file.
	secret string
}

func newCluster(t testing.TB, size int) *cluster {
	t.Helper()
	c := &cluster{t: t, stops: map[string]func(){}}
	for i := 0; i < size; i++ {
		c.add(fmt.Sprintf("n%d", i))
	}
	c.waitConverged()
	return c
}

func (c *cluster) add(name string) *node.Node {
	c.t.Helper()
	cfg := node.LocalConfig(name)
	if c.secret == "" {
		c.secret = filepath.Join(c.t.TempDir(), "cluster.secret")
		if err := os.WriteFile(c.secret, []byte(base64.StdEncoding.EncodeToString([]byte("client tests' cluster secret, 32+"))+"\n"), 0o600); err != nil {
			c.t.Fatal(err)
		}
	}
	cfg.ClusterSecretFile = c.secret
	if c.seed != "" {
		cfg.Join = []string{c.seed}
	}
	n, err := node.New(cfg)
	if err != nil {
		c.t.Fatalf("node.New(%s): %v", name, err)
	}
	if c.seed == "" {
		c.seed = n.GossipAddr()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				c.t.Errorf("%s: Run: %v", name, err)
			}
		})
	}
	c.stops[name] = stop
	c.t.Cleanup(stop)
	c.nodes = append(c.nodes, n)
	return n
}

// stop shuts a node down gracefully (leave, hand off, drain).
func (c *cluster) stop(name string) {
	c.t.Helper()
	c.stops[name]()
	for i, n := range c.nodes {
		if n.Name() == name {
			c.nodes = append(c.nodes[:i], c.nodes[i+1:]...)
			break
		}
	}
}

// waitConverged waits until every node's ring has every node.
func (c *cluster) waitConverged() {
	c.t.Helper()
	waitFor(c.t, 15*time.Second, "the ring to converge", func() bool {
		for _, n := range c.nodes {
			if r := n.Limiter().Ring(); !n.Ready() || r == nil || r.Len() != len(c.nodes) {
				return false
			}
		}
		return true
	})
}

func (c *cluster) addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.GRPCAddr())
	}
	return out
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newClient(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var hourly = client.Limit{Limit: 100, Period: time.Hour}

// Checks go straight to their owners: from the first check on (the client
// asks for the ring before it), no node has to forward, and each key is
// counted exactly once.
func TestRoutesToOwners(t *testing.T) {
	tc := newCluster(t, 3)
	c := newClient(t, client.Config{Addrs: tc.addrs()[:1]}) // one seed
	allowed := map[string]int{}
	owners := map[string]bool{}
	for i := 0; i < 600; i++ {
		key := fmt.Sprintf("acct:%d", i%30)
		res, err := c.Check(context.Background(), client.Item{Key: key, Limit: client.Limit{Limit: 10, Period: time.Hour}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("check %d: %v %v", i, err, res)
		}
		if res[0].Source != "owner" {
			t.Fatalf("check %d answered from %q", i, res[0].Source)
		}
		if res[0].Allowed {
			allowed[key]++
		}
		owners[res[0].Owner] = true
	}
	for key, n := range allowed {
		if n != 10 {
			t.Errorf("%s: %d allowed, want exactly 10", key, n)
		}
	}
	st := c.Stats()
	if st.Members != 3 || len(owners) != 3 {
		t.Fatalf("client ring has %d members, answers came from %d owners; want 3 and 3", st.Members, len(owners))
	}
	if st.Misrouted != 0 {
		t.Fatalf("%d checks went to a node that had to forward them; want 0 (stats %+v)", st.Misrouted, st)
	}
	if st.RefreshError != "" {
		t.Fatalf("membership refresh failed: %s", st.RefreshError)
	}
}

// Concurrent checks share messages: with one message in flight per node,
// 64 callers' checks go out together, and every answer reaches its caller
// (each key admits exactly its limit).
func TestCoalescesConcurrentChecks(t *testing.T) {
	tc := newCluster(t, 1)
	c := newClient(t, client.Config{Addrs: tc.addrs(), MaxInflight: 1})
	const callers, each, keys = 64, 100, 16
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				k := (w + i) % keys
				res, err := c.Check(context.Background(), client.Item{Key: fmt.Sprintf("k%d", k), Limit: hourly})
				if err == nil && res[0].Err != nil {
					err = res[0].Err
				}
				if err != nil {
					errs <- err
					return
				}
				if res[0].Allowed {
					allowed[k].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range allowed {
		if n := allowed[k].Load(); n != 100 {
			t.Errorf("k%d: %d allowed of %d, want exactly 100", k, n, callers*each/keys)
		}
	}
	st := c.Stats()
	if st.Items != callers*each {
		t.Fatalf("%d checks sent, want %d", st.Items, callers*each)
	}
	if st.Messages*4 > st.Items {
		t.Fatalf("%d checks in %d messages (%.1f a message); want at least 4 a message under 64 callers",
			st.Items, st.Messages, float64(st.Items)/float64(st.Messages))
	}
	t.Logf("%d checks in %d messages (%.1f a message), %d calls queued", st.Items, st.Messages,
		float64(st.Items)/float64(st.Messages), st.Queued)
}

// A lone caller's check is sent at once, in a message of its own: it never
// waits in the queue for company (there is no timer to wait on either).
// BenchmarkIdleCheck shows its latency beside a unary call.
func TestIdleCheckGoesOutAtOnce(t *testing.T) {
	tc := newCluster(t, 1)
	c := newClient(t, client.Config{Addrs: tc.addrs()})
	for i := 0; i < 50; i++ {
		if _, err := c.Check(context.Background(), client.Item{Key: "idle", Limit: hourly}); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	if st.Messages != 50 || st.Items != 50 || st.Queued != 0 {
		t.Fatalf("50 sequential checks: %d messages, %d items, %d queued; want 50, 50, 0", st.Messages, st.Items, st.Queued)
	}
}

// When a node joins, the old owners forward the keys it took; the first
// such answer (from an owner the client did not expect) makes the client
// refresh its ring, after which checks go to the new node directly. The
// counters move with the keys.
func TestReroutesWhenRingChanges(t *testing.T) {
	tc := newCluster(t, 2)
	c := newClient(t, client.Config{Addrs: tc.addrs()[:1], RefreshInterval: time.Hour})
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = fmt.Sprintf("acct:%d", i)
		res, err := c.Check(context.Background(), client.Item{Key: keys[i], Limit: hourly, Cost: 60})
		if err != nil || !res[0].Allowed {
			t.Fatalf("spend %s: %v %v", keys[i], res, err)
		}
	}
	if st := c.Stats(); st.Members != 2 || st.Misrouted != 0 {
		t.Fatalf("before the join: %+v, want 2 members and nothing misrouted", st)
	}
	joined := tc.add("n2")
	tc.waitConverged()
	// The periodic refresh is an hour away: only answers from unexpected
	// owners can tell the client.
	waitFor(t, 10*time.Second, "the client to learn of n2", func() bool {
		for _, k := range keys {
			if _, err := c.Usage(context.Background(), k, "", hourly); err != nil {
				t.Fatal(err)
			}
		}
		return c.Stats().Members == 3
	})
	before := c.Stats().Misrouted
	if before == 0 {
		t.Fatalf("no answer came from an unexpected owner, yet the client refreshed")
	}
	taken := 0
	for _, k := range keys {
		res, err := c.Usage(context.Background(), k, "", hourly)
		if err != nil {
			t.Fatal(err)
		}
		if res.Remaining != 40 {
			t.Errorf("%s on %s: remaining %d, want 40", k, res.Owner, res.Remaining)
		}
		if res.Owner == joined.Name() {
			taken++
		}
	}
	if st := c.Stats(); st.Misrouted != before {
		t.Fatalf("after the refresh, %d more checks went to a node that forwarded them", st.Misrouted-before)
	}
	if taken == 0 {
		t.Fatalf("n2 took none of %d keys", len(keys))
	}
}

// A node that shuts down drains its streams: the client sends elsewhere
// and no check fails.
func TestNodeLeavingUnderLoad(t *testing.T) {
	tc := newCluster(t, 3)
	c := newClient(t, client.Config{Addrs: tc.addrs()})
	l := startLoad(c)
	waitFor(t, 10*time.Second, "load", func() bool { return l.checks.Load() > 500 })
	tc.stop("n2")
	at := l.checks.Load()
	waitFor(t, 10*time.Second, "the client to drop n2", func() bool { return c.Stats().Members == 2 })
	waitFor(t, 10*time.Second, "more load", func() bool { return l.checks.Load() > at+500 })
	l.stop()
	if l.fails.Load() != 0 {
		t.Fatalf("%d of %d checks failed; first: %v", l.fails.Load(), l.checks.Load(), l.firstErr.Load())
	}
	t.Logf("%d checks, stats %+v", l.checks.Load(), c.Stats())
}

// load is 8 goroutines checking 200 keys through c until stop.
type load struct {
	cancel                   context.CancelFunc
	wg                       sync.WaitGroup
	checks, fails, fallbacks atomic.Int64
	firstErr                 atomic.Value
}

func startLoad(c *client.Client) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	for w := 0; w < 8; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				res, err := c.Check(ctx, client.Item{Key: fmt.Sprintf("k%d", (w*7919+i)%200), Limit: client.Limit{Limit: 1e6, Period: time.Second}})
				if ctx.Err() != nil {
					return
				}
				l.checks.Add(1)
				if err == nil && res[0].Err != nil {
					err = res[0].Err
				}
				switch {
				case err != nil:
					l.fails.Add(1)
					l.firstErr.CompareAndSwap(nil, err)
				case res[0].Source == "fallback":
					l.fallbacks.Add(1)
				}
			}
		}()
	}
	return l
}

func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// A call whose items go to several nodes fails as a whole on bad input,
// naming the field, before anything is spent.
func TestInvalidItemFailsWholeCall(t *testing.T) {
	tc := newCluster(t, 2)
	c := newClient(t, client.Config{Addrs: tc.addrs()})
	items := []client.Item{
		{Key: "a", Limit: hourly},
		{Key: "b", Limit: hourly},
		{Key: "c", Limit: client.Limit{Limit: 0, Period: time.Hour}},
	}
	_, err := c.Check(context.Background(), items...)
	if status.Code(err) != codes.InvalidArgument || !contains(err.Error(), "items[2].limit.limit") {
		t.Fatalf("err = %v, want InvalidArgument naming items[2].limit.limit", err)
	}
	for _, k := range []string{"a", "b"} {
		res, err := c.Usage(context.Background(), k, "", hourly)
		if err != nil || res.Remaining != 100 {
			t.Fatalf("%s after the failed call: %+v %v, want nothing spent", k, res, err)
		}
	}
	_, err = c.Check(context.Background(), client.Item{Key: "a", Policy: "no-such-policy"})
	if status.Code(err) != codes.InvalidArgument || !contains(err.Error(), "items[0].policy") {
		t.Fatalf("err = %v, want InvalidArgument naming items[0].policy", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A node that crashes (no drain) breaks its stream: the checks in flight on
// it go to another node, which answers them from the limit's fallback
// until the ring drops the dead node; then the client routes around it. No
// check fails.
func TestNodeCrashUnderLoad(t *testing.T) {
	tc := newCluster(t, 3)
	c := newClient(t, client.Config{Addrs: tc.addrs()})
	l := startLoad(c)
	waitFor(t, 10*time.Second, "load", func() bool { return l.checks.Load() > 500 })
	tc.nodes[2].Inject(node.FaultCrash)
	waitFor(t, 30*time.Second, "the client to drop the crashed node", func() bool { return c.Stats().Members == 2 })
	at := l.checks.Load()
	waitFor(t, 10*time.Second, "more load", func() bool { return l.checks.Load() > at+500 })
	l.stop()
	if l.fails.Load() != 0 {
		t.Fatalf("%d of %d checks failed; first: %v", l.fails.Load(), l.checks.Load(), l.firstErr.Load())
	}
	t.Logf("%d checks (%d from fallback), stats %+v", l.checks.Load(), l.fallbacks.Load(), c.Stats())
}

// Calendar limits route by the same identity the nodes compute (the
// calendar and the zone, "" being UTC): every check reaches its owner
// directly.
func TestRoutesCalendarLimitsToOwners(t *testing.T) {
	tc := newCluster(t, 3)
	c := newClient(t, client.Config{Addrs: tc.addrs()[:1]})
	for i := 0; i < 60; i++ {
		lim := client.Limit{Limit: 10, Calendar: client.Day}
		if i%2 == 1 {
			lim = client.Limit{Algorithm: client.FixedWindow, Limit: 10, Calendar: client.Month, Timezone: "Europe/Berlin"}
		}
		res, err := c.Check(context.Background(), client.Item{Key: fmt.Sprintf("tenant:%d", i%20), Limit: lim})
		if err != nil || res[0].Err != nil || res[0].Source != "owner" {
			t.Fatalf("check %d: %v %+v", i, err, res)
		}
	}
	if st := c.Stats(); st.Misrouted != 0 {
		t.Fatalf("%d calendar checks went to a node that had to forward them; want 0 (stats %+v)", st.Misrouted, st)
	}
}
