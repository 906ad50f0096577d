package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-rl/sluice/internal/bench"
	"github.com/sluice-rl/sluice/internal/procs"
)

// Gubernator v2 (github.com/gubernator-io/gubernator), the fourth system of
// scenarios a-d: three instances of bin/gubernator (make gubref, from the
// nested module tools/gubref) in one memberlist cluster, each on its own
// loopback address, 127.0.0.1, .2 and .3, because Gubernator's memberlist
// peers are keyed by IP and nodes that share one are merged.
const (
	gubModule = "github.com/gubernator-io/gubernator/v2"
	gubNodes  = 3
	// gubMethod is Gubernator's V1 service's one check RPC (gubernator.proto).
	gubMethod = "/pb.gubernator.V1/GetRateLimits"
	// gubName is the rate limit's name; a key is its unique_key.
	gubName = "bench"
)

// gubEnv is Gubernator's configuration (GUBER_*, config.go) besides its
// addresses: its defaults, but for warnings only in the log and no
// tracing exporter.
var gubEnv = []string{"GUBER_LOG_LEVEL=warn", "OTEL_TRACES_EXPORTER=none", "GUBER_PEER_DISCOVERY_TYPE=member-list"}

// gubNode is one Gubernator instance.
type gubNode struct {
	child      *child
	grpc, http string
}

// startGubernator starts the three instances, the first one the others
// join, and waits until each has the three as peers.
func (r *runner) startGubernator(ctx context.Context) {
	fail := func(err error) {
		r.gubErr = err
		r.logf("gubernator: %v", err)
	}
	if _, err := os.Stat(r.o.gubernatorBin); err != nil {
		fail(fmt.Errorf("%w (make gubref builds it)", err))
		return
	}
	// The ports are free on 127.0.0.1; the same numbers on .2 and .3 are
	// taken by nothing that binds one address.
	ports, err := procs.FreePorts(3)
	if err != nil {
		fail(err)
		return
	}
	grpcPort, httpPort, gossipPort := strconv.Itoa(ports[0]), strconv.Itoa(ports[1]), strconv.Itoa(ports[2])
	seed := net.JoinHostPort("127.0.0.1", gossipPort)
	r.logf("starting a %d-node Gubernator cluster (%s) on 127.0.0.1-%d", gubNodes, r.o.gubernatorBin, gubNodes)
	var nodes []*gubNode
	for i := 1; i <= gubNodes; i++ {
		ip := fmt.Sprintf("127.0.0.%d", i)
		n := &gubNode{grpc: net.JoinHostPort(ip, grpcPort), http: net.JoinHostPort(ip, httpPort)}
		gossip := net.JoinHostPort(ip, gossipPort)
		env := append([]string{
			"GUBER_INSTANCE_ID=gubernator-" + strconv.Itoa(i),
			"GUBER_GRPC_ADDRESS=" + n.grpc, "GUBER_HTTP_ADDRESS=" + n.http, "GUBER_ADVERTISE_ADDRESS=" + n.grpc,
			"GUBER_MEMBERLIST_ADDRESS=" + gossip, "GUBER_MEMBERLIST_BIND_ADDRESS=" + gossip,
			"GUBER_MEMBERLIST_KNOWN_NODES=" + seed,
		}, gubEnv...)
		c, err := r.cs.startEnv(fmt.Sprintf("gubernator-%d", i), env, r.o.gubernatorBin)
		if err == nil {
			err = procs.WaitTCP(ctx, c, n.grpc, 30*time.Second)
		}
		if err != nil {
			fail(err)
			return
		}
		n.child = c
		nodes = append(nodes, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		if err := waitGubernatorPeers(ctx, n, gubNodes, deadline); err != nil {
			fail(err)
			return
		}
	}
	r.gub = nodes
}

// waitGubernatorPeers polls the instance's HealthCheck (HTTP gateway) until
// it is healthy with want peers, or the deadline passes.
func waitGubernatorPeers(ctx context.Context, n *gubNode, want int, deadline time.Time) error {
	hc := &http.Client{Timeout: time.Second}
	var last string
	for {
		var h struct {
			Status    string `json:"status"`
			Message   string `json:"message"`
			PeerCount int    `json:"peer_count"`
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.http+"/v1/HealthCheck", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
		}
		switch {
		case err != nil:
			last = err.Error()
		case h.Status == "healthy" && h.PeerCount == want:
			return nil
		default:
			last = fmt.Sprintf("status %q %s, %d peers", h.Status, h.Message, h.PeerCount)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not %d healthy peers: %s; log: %s", n.child.Name, want, last, n.child.LogTail(10))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// gubernatorVersion is Gubernator's module version, from the binary's
// build information.
func gubernatorVersion(bin string) string {
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	if v := procs.ModuleVersion(bin, gubModule); v != "" {
		return gubModule + " " + v
	}
	return gubModule
}

// gubTarget sends one GetRateLimits per call, every key a request, to the
// instances in turn, as a service behind a load balancer would: the
// instance that takes a call forwards each key to its owner (batched, by
// Gubernator's default behaviour).
type gubTarget struct {
	conns []*grpc.ClientConn
	next  atomic.Uint32
	limit int64
	dur   time.Duration
}

var _ bench.Target = (*gubTarget)(nil)

// newGubTarget connects to every instance. Gubernator's token bucket
// refills the whole limit once per duration (it has no burst separate
// from the limit), so limit per period is the closest to the others'.
func newGubTarget(nodes []*gubNode, limit int64, period time.Duration) (*gubTarget, error) {
	t := &gubTarget{limit: limit, dur: period}
	for _, n := range nodes {
		conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(gubCodec{})))
		if err != nil {
			t.Close()
			return nil, err
		}
		t.conns = append(t.conns, conn)
	}
	return t, nil
}

func (t *gubTarget) Check(ctx context.Context, keys []string, allowed []bool) error {
	conn := t.conns[int(t.next.Add(1))%len(t.conns)]
	req := &gubRequest{keys: keys, limit: t.limit, durationMs: t.dur.Milliseconds()}
	resp := &gubResponse{allowed: allowed}
	if err := conn.Invoke(ctx, gubMethod, req, resp); err != nil {
		return err
	}
	if resp.n != len(keys) {
		return fmt.Errorf("gubernator: %d responses for %d requests", resp.n, len(keys))
	}
	if resp.err != "" {
		return fmt.Errorf("gubernator: %s", resp.err)
	}
	return nil
}

func (t *gubTarget) Close() error {
	for _, c := range t.conns {
		c.Close()
	}
	return nil
}

// gubTargets judges Gubernator's target in a and b: at 8 and 64 callers,
// Sluice answers at least 10× Gubernator's checks/s.
func gubTargets(rep *Report) []Target {
	if !contains(rep.Systems, "gubernator") {
		return nil
	}
	var ts []Target
	for _, sc := range []string{"a", "b"} {
		if !rep.ran(sc) {
			continue
		}
		const n = "checks/s ≥ 10× Gubernator's"
		s, g := rep.result(sc, "sluice"), rep.result(sc, "gubernator")
		switch {
		case !s.ok():
			ts = append(ts, Target{sc, n, "no Sluice result" + errSuffix(s), statusNA})
		case !g.ok():
			ts = append(ts, Target{sc, n, "no Gubernator result" + errSuffix(g), statusNA})
		default:
			ratio := s.Summary.ChecksPerSec / g.Summary.ChecksPerSec
			ts = append(ts, Target{sc, n, fmt.Sprintf("%s vs %s checks/s (%.2f×)", fmtRate(s.Summary.ChecksPerSec),
				fmtRate(g.Summary.ChecksPerSec), ratio), judge(ratio >= 10)})
		}
	}
	return ts
}
