package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// rlsYAML is a one-domain configuration: key k limited to rpu per unit.
func rlsYAML(rpu int, unit string) string {
	return fmt.Sprintf("domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: %s, requests_per_unit: %d}\n", unit, rpu)
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rlsClient is an Envoy-side client of a node's RLS.
func rlsClient(t testing.TB, addr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// userReq asks for hits of user=u in domain web; hits < 0 sets the
// descriptor's hits_addend to 0 (a read).
func userReq(u string, hits int) *rlsv3.RateLimitRequest {
	d := &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: u}}}
	if hits < 0 {
		d.HitsAddend = wrapperspb.UInt64(0)
		hits = 0
	}
	return &rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*rlcommon.RateLimitDescriptor{d}, HitsAddend: uint32(hits)}
}

func shouldRateLimit(t testing.TB, c rlsv3.RateLimitServiceClient, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// TestRLSOverGRPC: a node serves the RLS on its gRPC port with its
// configuration, its clock placing the windows and duration_until_reset;
// it reports the service SERVING; without a configuration every
// descriptor is OK.
func TestRLSOverGRPC(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), rlsYAML(2, "minute"))
	clk := newFakeClock() // 12:00:00 exactly
	clk.Advance(15 * time.Second)
	n := startNode(t, func(c *node.Config) { c.RLSConfig = dir; c.Clock = clk.Now })
	c := rlsClient(t, n.GRPCAddr())
	for i, want := range []struct {
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
		reset     int64
	}{{rlsv3.RateLimitResponse_OK, 1, 45}, {rlsv3.RateLimitResponse_OK, 0, 45}, {rlsv3.RateLimitResponse_OVER_LIMIT, 0, 45}} {
		resp := shouldRateLimit(t, c, userReq("alice", 0))
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != want.code || st.GetCode() != want.code || st.GetLimitRemaining() != want.remaining ||
			st.GetDurationUntilReset().GetSeconds() != want.reset || st.GetCurrentLimit().GetRequestsPerUnit() != 2 {
			t.Fatalf("step %d: %v, want %v remaining %d reset %d", i, resp, want.code, want.remaining, want.reset)
		}
	}
	clk.Advance(45 * time.Second) // the next minute
	if st := shouldRateLimit(t, c, userReq("alice", 0)).GetStatuses()[0]; st.GetCode() != rlsv3.RateLimitResponse_OK || st.GetDurationUntilReset().GetSeconds() != 60 {
		t.Fatalf("next window: %v", st)
	}
	hc := healthpb.NewHealthClient(mustConn(t, n.GRPCAddr()))
	if h, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: rlsv3.RateLimitService_ServiceDesc.ServiceName}); err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health of the RLS: %v %v", h, err)
	}

	bare := startNode(t, nil)
	resp := shouldRateLimit(t, rlsClient(t, bare.GRPCAddr()), userReq("alice", 1000))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Fatalf("unconfigured node: %v, want OK with no limit", resp)
	}
}

func mustConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestRLSExactAcrossNodes: Envoy calling every node of a 3-node cluster
// at once gets exactly the limit admitted for one descriptor; and a
// request's descriptors go to each owner in one RPC.
func TestRLSExactAcrossNodes(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), rlsYAML(20, "hour"))
	tc := newTestCluster0(t, 3, func(c *node.Config) { c.RLSConfig = dir })
	var allowed, calls atomic.Int64
	var wg sync.WaitGroup
	for _, n := range tc.nodes {
		c := rlsClient(t, n.GRPCAddr())
		for range 3 {
			wg.Go(func() {
				for range 15 {
					resp := shouldRateLimit(t, c, userReq("shared", 0))
					calls.Add(1)
					if resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
						allowed.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if got := allowed.Load(); got != 20 {
		t.Fatalf("%d of %d calls allowed across 3 nodes, want exactly 20", got, calls.Load())
	}
	// Every hit counted on the owner: a read is over on any node.
	for _, n := range tc.nodes {
		if st := shouldRateLimit(t, rlsClient(t, n.GRPCAddr()), userReq("shared", -1)).GetStatuses()[0]; st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Errorf("read on %s: %v, want over", n.Name(), st)
		}
	}

	// 30 descriptors of one request: at most one RPC to each other node.
	n0 := tc.nodes[0]
	req := &rlsv3.RateLimitRequest{Domain: "web"}
	for i := range 30 {
		req.Descriptors = append(req.Descriptors, userReq(fmt.Sprintf("batch-%d", i), 0).Descriptors[0])
	}
	before := n0.PeerStats()
	resp := shouldRateLimit(t, rlsClient(t, n0.GRPCAddr()), req)
	after := n0.PeerStats()
	if len(resp.GetStatuses()) != 30 || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("batch: %v", resp)
	}
	rpcs, items := after.CheckRPCs-before.CheckRPCs, after.ForwardedItems-before.ForwardedItems
	if rpcs > 2 || items == 0 {
		t.Errorf("30 descriptors went out in %d RPCs with %d items, want at most 2 RPCs", rpcs, items)
	}
}

// newTestCluster0 is newTestCluster with a change to every node's config.
func newTestCluster0(t *testing.T, size int, mutate func(*node.Config)) *testCluster {
	t.Helper()
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i := range size {
		tc.addWith(fmt.Sprintf("n%d", i), mutate)
	}
	tc.waitConverged()
	return tc
}

// configMapSwap replaces dir's ConfigMap-style contents (files in a
// timestamped directory behind the "..data" symlink) with files.
func configMapSwap(t *testing.T, dir string, gen int, files map[string]string) {
	t.Helper()
	ts := fmt.Sprintf("..2026_12_02_12_00_%02d.%d", gen, gen)
	for name, data := range files {
		writeFile(t, filepath.Join(dir, ts, name), data)
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// metric scrapes the node's /metrics for one sample line's value.
func metric(t *testing.T, n *node.Node, sample string) string {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// TestRLSReload: a ConfigMap update is applied within a second and the
// counters carry over; an invalid update keeps the configuration in force
// and is counted; SIGHUP (Reload) applies a rewritten file.
func TestRLSReload(t *testing.T) {
	dir := t.TempDir()
	configMapSwap(t, dir, 1, map[string]string{"web.yaml": rlsYAML(5, "hour")})
	n := startNode(t, func(c *node.Config) { c.RLSConfig = dir; c.Clock = newFakeClock().Now })
	c := rlsClient(t, n.GRPCAddr())
	shouldRateLimit(t, c, userReq("bob", 3))
	configMapSwap(t, dir, 2, map[string]string{"web.yaml": rlsYAML(10, "hour")})
	var st *rlsv3.RateLimitResponse_DescriptorStatus
	waitFor(t, time.Second, "the ConfigMap update applied", func() bool {
		st = shouldRateLimit(t, c, userReq("bob", -1)).GetStatuses()[0]
		return st.GetCurrentLimit().GetRequestsPerUnit() == 10
	})
	if st.GetLimitRemaining() != 7 {
		t.Fatalf("after the reload: remaining %d, want 10-3 = 7 (the counter kept)", st.GetLimitRemaining())
	}

	configMapSwap(t, dir, 3, map[string]string{"web.yaml": "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight}\n"})
	waitFor(t, time.Second, "the invalid update counted", func() bool {
		return metric(t, n, "ratelimit_service_config_load_error") == "1"
	})
	if st := shouldRateLimit(t, c, userReq("bob", -1)).GetStatuses()[0]; st.GetCurrentLimit().GetRequestsPerUnit() != 10 {
		t.Fatalf("after an invalid update: %v, want the last good limit 10", st)
	}
	if got := metric(t, n, "ratelimit_service_config_load_success"); got != "2" {
		t.Errorf("config_load_success = %q, want 2", got)
	}

	// SIGHUP: a file path rewritten in place, reloaded on demand.
	file := filepath.Join(t.TempDir(), "web.yaml")
	writeFile(t, file, rlsYAML(1, "day"))
	m := startNode(t, func(c *node.Config) { c.RLSConfig = file })
	writeFile(t, file, rlsYAML(4, "day"))
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if st := shouldRateLimit(t, rlsClient(t, m.GRPCAddr()), userReq("x", -1)).GetStatuses()[0]; st.GetCurrentLimit().GetRequestsPerUnit() != 4 {
		t.Fatalf("after Reload: %v, want limit 4", st)
	}
	writeFile(t, file, "domain: web\nnope: 1\n")
	if err := m.Reload(); err == nil || !strings.Contains(err.Error(), file+":2: nope") {
		t.Fatalf("Reload of an invalid file: %v, want an error naming %s:2: nope", err, file)
	}
	if _, err := node.New(withRLS(node.LocalConfig("bad"), file)); err == nil || !strings.Contains(err.Error(), "RLSConfig") {
		t.Fatalf("node.New with an invalid RLS config: %v", err)
	}
}

func withRLS(c node.Config, path string) node.Config {
	c.RLSConfig = path
	return c
}

// TestRLSOwnerUnreachable: with a descriptor's owner unreachable, Envoy's
// calls (with a short deadline) are answered before their deadline by the
// local share of the limit (30 over 3 nodes: 10).
func TestRLSOwnerUnreachable(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), rlsYAML(30, "hour"))
	tc := newTestCluster0(t, 3, func(c *node.Config) { c.RLSConfig, c.Replicas = dir, 0 }) // the local share: no heir acts
	n0, owner := tc.nodes[0], tc.nodes[2]
	// The counter's key is the reference's cache key; ask its owner through
	// sluice.v1 with the same inline limit.
	sc := newClient(t, n0.GRPCAddr())
	lim := client.Limit{Algorithm: client.FixedWindowHits, Limit: 30, Period: time.Hour}
	var user string
	for i := 0; user == "" && i < 1000; i++ {
		if ownerOf(t, sc, fmt.Sprintf("web_user_u%d_", i), lim).Owner == owner.Name() {
			user = fmt.Sprintf("u%d", i)
		}
	}
	if user == "" {
		t.Fatal("no user owned by n2")
	}
	owner.Inject(node.FaultGRPCDown)
	c := rlsClient(t, n0.GRPCAddr())
	const deadline = 100 * time.Millisecond
	allowed := 0
	for i := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		resp, err := c.ShouldRateLimit(ctx, userReq(user, 0))
		took := time.Since(start)
		cancel()
		if err != nil {
			t.Fatalf("call %d: %v after %v, want an answer within %v", i, err, took, deadline)
		}
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 20 allowed with the owner unreachable, want the local share 10", allowed)
	}
}
