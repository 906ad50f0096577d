//go:build e2e

// The suite runs Sluice clusters of real containers (the sluice:dev image
// that `make image` builds) and checks admission bounds, failover,
// partitions, rolling restarts and scaling. Run it with `make e2e`.
package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// image is the image under test: sluice:dev (`make image`), or
// $SLUICE_E2E_IMAGE, so that worktrees sharing one Docker daemon can test
// images of their own.
var image = imageUnderTest()

func imageUnderTest() string {
	if v := os.Getenv("SLUICE_E2E_IMAGE"); v != "" {
		return v
	}
	return "sluice:dev"
}

// docker runs the docker CLI and returns its trimmed combined output.
func docker(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil {
		return s, fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, s)
	}
	return s, nil
}

func mustDocker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := docker(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// requireDocker fails (never skips) when Docker or the image is missing.
func requireDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatalf("e2e needs the docker CLI: %v", err)
	}
	if v, err := docker("version", "--format", "{{.Server.Version}}"); err != nil {
		t.Fatalf("e2e needs a reachable Docker daemon: %v", err)
	} else {
		t.Logf("docker engine %s", v)
	}
	if _, err := docker("image", "inspect", image); err != nil {
		t.Fatalf("image %s not found (run `make image` or `make e2e`): %v", image, err)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago. Ports
// are fixed up front (not `-p 127.0.0.1::8081`) so that they survive
// `docker start` after a stop or kill. They are drawn below Linux's
// ephemeral range (32768 up), where no outgoing connection takes one
// meanwhile, and never twice in one run: a port published by a container
// that still exists is Docker's even while it is not bound (CI saw "port
// is already allocated").
func freePort(t testing.TB) int {
	t.Helper()
	usedPorts.Lock()
	defer usedPorts.Unlock()
	for range 500 {
		port := 20000 + rand.IntN(12000)
		if usedPorts.m[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		usedPorts.m[port] = true
		return port
	}
	t.Fatal("no free port below the ephemeral range in 500 draws")
	return 0
}

// usedPorts are the ports freePort has handed out in this run.
var usedPorts = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

type node struct {
	short     string // n0
	name      string // <prefix>-n0: container name, hostname and node name
	clientNet string // this node's own network, where its ports are published
	ip        string // static address on the cluster network
	grpcPort  int
	httpPort  int
	peerPort  int            // published peer port; 0 if not published
	cli       *client.Client // talks to this node only
}

func (n *node) grpcAddr() string { return "127.0.0.1:" + strconv.Itoa(n.grpcPort) }

// cluster is a set of Sluice containers. Each container has its own bridge
// network ("client", ports published on 127.0.0.1) and a static address on
// one shared internal network ("cluster") that the nodes advertise and join
// each other through by container name, like a StatefulSet. Disconnecting a
// container from the cluster network partitions it while the test still
// reaches it through its published ports; as no other network is shared,
// peer names do not resolve from a partitioned node either.
type cluster struct {
	t          *testing.T
	prefix     string
	clusterNet string
	rlsDir     string // the RLS configuration every node loads (SLUICE_RLS_CONFIG)
	keyFile    string // the cluster secret file every node gets (SLUICE_CLUSTER_SECRET_FILE); "" with peer mTLS
	subnet     string // e.g. 10.213.7.
	nodes      map[string]*node
	opts       clusterOpts
}

// clusterOpts are the settings of a cluster beyond the defaults.
type clusterOpts struct {
	// env is added to every node's environment.
	env []string
	// files, if set, is a host directory copied into every container at
	// /tls (tlsMount) before it starts.
	files string
	// tls is the clients' TLS configuration (gRPC and HTTP); nil is
	// plaintext.
	tls *tls.Config
	// publishPeer publishes each node's peer port on 127.0.0.1.
	publishPeer bool
	// name, if set, goes into the container names, so that the cluster
	// never meets another test's containers.
	name string
	// keyFile, if set, is the cluster secret file every node gets
	// (SLUICE_CLUSTER_SECRET_FILE); "" means a new secret, or none when
	// env sets peer mTLS (SLUICE_PEER_TLS_CERT_FILE).
	keyFile string
	// dataDir, if set, is an empty directory made in every container,
	// the node's to write, before it starts (persist_test.go); the
	// container keeps it across stop and start.
	dataDir string
}

// tlsMount is where clusterOpts.files is copied.
const tlsMount = "/tls"

func newCluster(t *testing.T, n int) *cluster { return newClusterOpts(t, n, clusterOpts{}) }

func newClusterOpts(t *testing.T, n int, opts clusterOpts) *cluster {
	prefix := fmt.Sprintf("sluice-e2e-%d", os.Getpid())
	if opts.name != "" {
		prefix = fmt.Sprintf("sluice-e2e-%s-%d", opts.name, os.Getpid())
	}
	if opts.keyFile == "" && !slices.ContainsFunc(opts.env, func(e string) bool { return strings.HasPrefix(e, "SLUICE_PEER_TLS_CERT_FILE=") }) {
		opts.keyFile = writeGossipKey(t, "cluster.secret") // 32 random bytes: a cluster secret too
	}
	c := &cluster{t: t, prefix: prefix, keyFile: opts.keyFile, nodes: map[string]*node{}, opts: opts}
	c.removeAll() // leftovers of an earlier run with this prefix
	t.Cleanup(c.teardown)
	c.clusterNet = c.prefix + "-cluster"
	c.rlsDir = writeRLSConfig(t)
	var lastErr error
	for i := 0; i < 40 && c.subnet == ""; i++ {
		third := (os.Getpid() + i*37) % 250
		sub := fmt.Sprintf("10.213.%d.", third)
		_, err := docker("network", "create", "--internal", "--subnet", sub+"0/24", c.clusterNet)
		if err == nil {
			c.subnet = sub
		}
		lastErr = err
	}
	if c.subnet == "" {
		t.Fatalf("cannot create the cluster network: %v", lastErr)
	}
	var seeds []string
	for i := 0; i < n; i++ {
		seeds = append(seeds, fmt.Sprintf("n%d", i))
	}
	for i := 0; i < n; i++ {
		c.addNode(i, seeds)
	}
	if err := c.waitMembers(n, c.names(seeds...), 60*time.Second); err != nil {
		c.dumpLogs()
		t.Fatal(err)
	}
	return c
}

func (c *cluster) names(shorts ...string) []string {
	out := make([]string, len(shorts))
	for i, s := range shorts {
		out[i] = c.prefix + "-" + s
	}
	return out
}

// addNode creates and starts node i, joining the nodes named in seeds.
func (c *cluster) addNode(i int, seeds []string) *node { return c.addNodeWith(i, seeds, c.keyFile) }

// addNodeWith is addNode with its own cluster secret file ("" for none).
func (c *cluster) addNodeWith(i int, seeds []string, keyFile string) *node {
	t := c.t
	n := &node{short: fmt.Sprintf("n%d", i)}
	n.name = c.prefix + "-" + n.short
	n.clientNet = fmt.Sprintf("%s-c%d", c.prefix, i)
	n.ip = fmt.Sprintf("%s%d", c.subnet, 10+i)
	n.grpcPort, n.httpPort = freePort(t), freePort(t)
	for n.httpPort == n.grpcPort {
		n.httpPort = freePort(t)
	}
	var join []string
	for _, s := range c.names(seeds...) {
		join = append(join, s+":7946")
	}
	var keyEnv []string
	if keyFile != "" {
		keyEnv = []string{"-e", "SLUICE_CLUSTER_SECRET_FILE=" + keyMount}
	}
	mustDocker(t, "network", "create", n.clientNet)
	args := []string{"create", "--name", n.name, "--hostname", n.name, "--network", n.clientNet,
		"-p", fmt.Sprintf("127.0.0.1:%d:8081", n.grpcPort),
		"-p", fmt.Sprintf("127.0.0.1:%d:8080", n.httpPort),
		"-e", "SLUICE_NODE_NAME=" + n.name,
		"-e", "SLUICE_GOSSIP_ADVERTISE_ADDR=" + n.ip + ":7946",
		"-e", "SLUICE_GRPC_ADVERTISE_ADDR=" + n.ip + ":8081",
		"-e", "SLUICE_PEER_ADVERTISE_ADDR=" + n.ip + ":8082",
		"-e", "SLUICE_JOIN=" + strings.Join(join, ","),
		"-e", "SLUICE_LOG_FORMAT=text",
		"-e", "SLUICE_RLS_CONFIG=" + rlsMount}
	if c.opts.publishPeer {
		n.peerPort = freePort(t)
		args = append(args, "-p", fmt.Sprintf("127.0.0.1:%d:8082", n.peerPort))
	}
	args = append(args, keyEnv...)
	env := c.opts.env
	if extra := os.Getenv("SLUICE_E2E_NODE_ENV"); extra != "" {
		env = append(slices.Clone(env), strings.Split(extra, ",")...)
	}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	mustDocker(t, append(args, image)...)
	// Copied in rather than bind-mounted, so that it works with a remote
	// daemon too; the container keeps it across stop and start.
	mustDocker(t, "cp", c.rlsDir, n.name+":"+rlsMount)
	if keyFile != "" {
		mustDocker(t, "cp", keyFile, n.name+":"+keyMount)
	}
	if c.opts.files != "" {
		mustDocker(t, "cp", c.opts.files, n.name+":"+tlsMount)
	}
	if c.opts.dataDir != "" {
		makeDataDir(t, n.name, c.opts.dataDir)
	}
	mustDocker(t, "network", "connect", "--ip", n.ip, c.clusterNet, n.name)
	mustDocker(t, "start", n.name)
	// The nodes advertise their cluster-network addresses, which the test
	// reaches only through published ports: no routing to owners.
	cli, err := client.New(client.Config{Addrs: []string{n.grpcAddr()}, Timeout: 2 * time.Second, DisableRouting: true, TLS: c.opts.tls})
	if err != nil {
		t.Fatal(err)
	}
	n.cli = cli
	c.nodes[n.short] = n
	return n
}

// allClient returns a client with the addresses of the given nodes.
func (c *cluster) allClient(shorts ...string) *client.Client {
	var addrs []string
	for _, s := range shorts {
		addrs = append(addrs, c.nodes[s].grpcAddr())
	}
	cli, err := client.New(client.Config{Addrs: addrs, Timeout: 2 * time.Second, DisableRouting: true, TLS: c.opts.tls})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

func (c *cluster) removeAll() {
	if out, err := docker("ps", "-aq", "--filter", "name=^/"+c.prefix+"-"); err == nil && out != "" {
		docker(append([]string{"rm", "-f"}, strings.Fields(out)...)...)
	}
	if out, err := docker("network", "ls", "-q", "--filter", "name="+c.prefix+"-"); err == nil && out != "" {
		for _, id := range strings.Fields(out) {
			docker("network", "rm", id)
		}
	}
}

func (c *cluster) teardown() {
	if c.t.Failed() {
		c.dumpLogs()
	}
	for _, n := range c.nodes {
		c.saveLogs(n)
	}
	for _, n := range c.nodes {
		if n.cli != nil {
			n.cli.Close()
		}
	}
	c.removeAll()
	if out, _ := docker("ps", "-aq", "--filter", "name=^/"+c.prefix+"-"); out != "" {
		c.t.Errorf("containers left behind: %s", out)
	}
	if out, _ := docker("network", "ls", "-q", "--filter", "name="+c.prefix+"-"); out != "" {
		c.t.Errorf("networks left behind: %s", out)
	}
}

// saveLogs appends node n's whole log to $SLUICE_E2E_LOG_DIR/<container>.log,
// if that is set, before its container is removed: to read what a node did
// in a failing run (with SLUICE_E2E_NODE_ENV=SLUICE_LOG_LEVEL=debug, say).
func (c *cluster) saveLogs(n *node) {
	dir := os.Getenv("SLUICE_E2E_LOG_DIR")
	if dir == "" {
		return
	}
	out, err := exec.Command("docker", "logs", n.name).CombinedOutput()
	if err != nil {
		c.t.Logf("logs of %s: %v", n.name, err)
	}
	// Appended: a node removed and added again keeps its name.
	f, err := os.OpenFile(filepath.Join(dir, n.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = f.Write(out)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		c.t.Logf("saving the logs of %s: %v", n.name, err)
	}
}

func (c *cluster) dumpLogs() {
	for _, s := range sortedKeys(c.nodes) {
		n := c.nodes[s]
		out, _ := docker("logs", "--tail", "40", n.name)
		c.t.Logf("--- last logs of %s ---\n%s", n.name, out)
	}
}

// members returns the alive members that node n reports.
func (c *cluster) members(n *node) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, ms, err := n.cli.Members(ctx)
	if err != nil {
		return nil, err
	}
	// A member counts once this node's ring has it (a share), and only
	// when the listed members make up the whole ring: the gossip list
	// runs ahead of the ring by the cluster's settle time.
	var out []string
	sum := 0.0
	for _, m := range ms {
		if m.State == "alive" && m.RingShare > 0 {
			out = append(out, m.Name)
			sum += m.RingShare
		}
	}
	if sum < 0.999 {
		out = append(out, fmt.Sprintf("(ring %.3f of the whole)", sum))
	}
	sort.Strings(out)
	return out, nil
}

// waitMembers polls until every node named in want reports exactly the
// members in want.
func (c *cluster) waitMembers(count int, want []string, timeout time.Duration) error {
	sort.Strings(want)
	wantS := strings.Join(want, ",")
	deadline := time.Now().Add(timeout)
	for {
		var bad []string
		for _, name := range want {
			n := c.byName(name)
			got, err := c.members(n)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", n.short, err))
			} else if len(got) != count || strings.Join(got, ",") != wantS {
				bad = append(bad, fmt.Sprintf("%s sees %v", n.short, got))
			}
		}
		if len(bad) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no ring of %d members within %v: %s", count, timeout, strings.Join(bad, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *cluster) byName(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no node %s", name)
	return nil
}

func (c *cluster) ready(n *node) bool {
	hc := http.Client{Timeout: time.Second}
	scheme := "http"
	if c.opts.tls != nil {
		scheme = "https"
		hc.Transport = &http.Transport{TLSClientConfig: c.opts.tls}
	}
	resp, err := hc.Get(fmt.Sprintf("%s://127.0.0.1:%d/readyz", scheme, n.httpPort))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (c *cluster) waitReady(n *node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for !c.ready(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v", n.short, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// ensureHealthy brings the base nodes back (running, on the cluster
// network) after an earlier scenario failed half-way, and waits for one
// ring of them.
func (c *cluster) ensureHealthy(t *testing.T, shorts ...string) {
	t.Helper()
	for _, s := range shorts {
		n := c.nodes[s]
		nets, err := docker("inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", n.name)
		if err == nil && !strings.Contains(nets, c.clusterNet) {
			mustDocker(t, "network", "connect", "--ip", n.ip, c.clusterNet, n.name)
		}
		if running, _ := docker("inspect", "-f", "{{.State.Running}}", n.name); running != "true" {
			mustDocker(t, "start", n.name)
		}
	}
	if err := c.waitMembers(len(shorts), c.names(shorts...), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if d, err := c.waitDataPath(t, shorts, 90*time.Second); err != nil {
		t.Fatal(err)
	} else if d > time.Second {
		t.Logf("checks through every node reached their owners only after %v", d.Round(time.Millisecond))
	}
}

// waitDataPath polls zero-cost checks of probe keys through each node
// until every one is answered by its owner (not from fallback), and
// returns how long that took.
func (c *cluster) waitDataPath(t *testing.T, shorts []string, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	lim := client.Limit{Limit: 1000, Period: time.Hour}
	keys := make([]string, 24)
	for i := range keys {
		keys[i] = fmt.Sprintf("probe-%d", i)
	}
	logged := false
	for {
		var bad []string
		for _, s := range shorts {
			n := c.nodes[s]
			for _, k := range keys {
				r, err := n.cli.Usage(context.Background(), k, "", lim)
				if err != nil || r.Err != nil || r.Source != "owner" {
					bad = append(bad, fmt.Sprintf("%s via %s: source %q owner %s err %v/%v", k, s, r.Source, r.Owner, err, r.Err))
				}
			}
		}
		if len(bad) == 0 {
			return time.Since(start), nil
		}
		if !logged {
			logged = true
			t.Logf("%d probe checks not answered by their owner, e.g. %s", len(bad), bad[0])
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("after %v, %d probe checks still not answered by their owner, e.g. %s", timeout, len(bad), strings.Join(bad[:min(3, len(bad))], "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// rec is one check made by the load generator.
type rec struct {
	at      time.Time
	via     string // node short name or "all"
	key     string
	allowed bool
	source  string
	owner   string
	err     error
	lat     time.Duration
}

// load runs workers that check keys through some clients until stopped.
type load struct {
	mu   sync.Mutex
	recs []rec
	stop chan struct{}
	wg   sync.WaitGroup
}

type via struct {
	name string
	cli  *client.Client
}

func startLoad(vias []via, keys []string, lim client.Limit, workers int, pause time.Duration) *load {
	l := &load{stop: make(chan struct{})}
	for w := 0; w < workers; w++ {
		v := vias[w%len(vias)]
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			for i := w; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				key := keys[(i*7+w)%len(keys)]
				start := time.Now()
				res, err := v.cli.Check(context.Background(), client.Item{Key: key, Limit: lim})
				r := rec{at: start, via: v.name, key: key, err: err, lat: time.Since(start)}
				if err == nil {
					r.allowed, r.source, r.owner, r.err = res[0].Allowed, res[0].Source, res[0].Owner, res[0].Err
				}
				l.mu.Lock()
				l.recs = append(l.recs, r)
				l.mu.Unlock()
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}(w)
	}
	return l
}

func (l *load) Stop() []rec {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	return l.snapshot()
}

func (l *load) snapshot() []rec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]rec(nil), l.recs...)
}

// waitFor polls cond on the load's records until it holds or timeout.
func (l *load) waitFor(timeout time.Duration, cond func([]rec) bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond(l.snapshot()) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stats summarises records: checks, errors, admitted, sources, p99.
type stats struct {
	checks, errors, admitted int
	sources                  map[string]int
	p99, max                 time.Duration
	firstErrs                []string
}

func summarize(recs []rec) stats {
	s := stats{sources: map[string]int{}}
	var lats []time.Duration
	for _, r := range recs {
		s.checks++
		lats = append(lats, r.lat)
		if r.err != nil {
			s.errors++
			if len(s.firstErrs) < 5 {
				s.firstErrs = append(s.firstErrs, fmt.Sprintf("%s via %s at %s: %v", r.key, r.via, r.at.Format("15:04:05.000"), r.err))
			}
			continue
		}
		if r.allowed {
			s.admitted++
		}
		s.sources[r.source]++
	}
	if len(lats) > 0 {
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		s.p99 = lats[(len(lats)*99)/100]
		if i := (len(lats) * 99) / 100; i >= len(lats) {
			s.p99 = lats[len(lats)-1]
		}
		s.max = lats[len(lats)-1]
	}
	return s
}

func (s stats) String() string {
	return fmt.Sprintf("checks=%d errors=%d admitted=%d sources=%v p99=%v max=%v",
		s.checks, s.errors, s.admitted, s.sources, s.p99.Round(time.Microsecond), s.max.Round(time.Microsecond))
}

func requireNoErrors(t *testing.T, s stats) {
	t.Helper()
	if s.errors > 0 {
		t.Errorf("%d failed checks, first: %s", s.errors, strings.Join(s.firstErrs, " | "))
	}
}

// owners reads the owner of each key (a zero-cost check).
func owners(t *testing.T, cli *client.Client, keys []string, lim client.Limit) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, k := range keys {
		r, err := cli.Usage(context.Background(), k, "", lim)
		if err != nil {
			t.Fatalf("usage %s: %v", k, err)
		}
		out[k] = r.Owner
	}
	return out
}

// checkRemaining reads the usage of each key from its owner and returns
// the keys whose remaining is not want, and how many keys each owner holds.
// An answer that is not from the owner (a fallback: the answering node could
// not reach the owner) says nothing about the owner's count: it is logged
// and the read retried for up to 15 s.
func checkRemaining(t *testing.T, cli *client.Client, keys []string, lim client.Limit, want int64) (bad []string, byOwner map[string]int) {
	t.Helper()
	byOwner = map[string]int{}
	for _, k := range keys {
		deadline := time.Now().Add(15 * time.Second)
		for {
			st := time.Now()
			r, err := cli.Usage(context.Background(), k, "", lim)
			lat := time.Since(st)
			if err == nil && r.Err == nil && r.Source == "owner" {
				byOwner[r.Owner]++
				if r.Remaining != want {
					bad = append(bad, fmt.Sprintf("%s: remaining %d on owner %s", k, r.Remaining, r.Owner))
				}
				break
			}
			t.Logf("usage %s: not an owner's answer (in %v): err=%v source=%s owner=%s remaining=%d item err=%v", k, lat.Round(time.Millisecond), err, r.Source, r.Owner, r.Remaining, r.Err)
			if time.Now().After(deadline) {
				bad = append(bad, fmt.Sprintf("%s: no owner's answer within 15s", k))
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return bad, byOwner
}
