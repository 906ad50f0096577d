package node_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-rl/sluice/node"
)

// startRLSCluster3 starts 3 nodes on loopback (startBenchCluster)
// serving the RLS rules of dir.
func startRLSCluster3(b *testing.B, dir string) []*node.Node {
	return startBenchCluster(b, 3, func(c *node.Config) { c.RLSConfig = dir })
}

// BenchmarkRLSCluster3 counts the peer messages (Check RPCs between
// nodes) per Envoy RLS call of descriptors [(user, <u>)] that are all
// distinct, on a 3-node cluster on loopback, one call at a time (so no
// message carries another call's items):
//
//   - batched: the call's descriptors sent to the nodes in turn, as
//     Envoy's round-robin cluster sends them: the node forwards them in
//     one message per other owner (api's RLS makes one limiter check of
//     them all);
//   - per-descriptor: the baseline of a descriptor per call, as a node
//     that checked descriptors one by one would forward them: one message
//     per descriptor not owned by the node asked;
//   - owner: the call sent to the owner of its descriptors (a ring-aware
//     caller, client.Owner), which forwards nothing.
//
// Reported: peer-msgs/call (messages per call of the given descriptors),
// items/peer-msg, and rls-calls/call (ShouldRateLimit calls made for
// them: the per-descriptor baseline makes one per descriptor). Counts,
// not times:
//
//	go test -run '^$' -bench RLSCluster3 -benchtime 2000x ./node/
func BenchmarkRLSCluster3(b *testing.B) {
	const rpu = 1_000_000_000
	dir := b.TempDir()
	writeFile(b, filepath.Join(dir, "web.yaml"), rlsYAML(rpu, "hour"))
	nodes := startRLSCluster3(b, dir)
	apis := make([]rlsv3.RateLimitServiceClient, len(nodes))
	byName := map[string]int{}
	for i, n := range nodes {
		apis[i] = rlsClient(b, n.GRPCAddr())
		byName[n.Name()] = i
	}
	c := routedClient(b, nodes[0].GRPCAddr())
	const users = 1200
	owner := make([]int, users) // index of each user's owner in nodes
	byOwner := make([][]string, len(nodes))
	for u := range users {
		name := "u" + strconv.Itoa(u)
		owner[u] = byName[rlsOwner(b, c, name, rpu).Name]
		byOwner[owner[u]] = append(byOwner[owner[u]], name)
	}
	for _, descs := range []int{3, 8} {
		// descriptors returns call i's users: distinct, over all users.
		descriptors := func(i int) []string {
			out := make([]string, descs)
			for j := range out {
				out[j] = "u" + strconv.Itoa((i*descs+j)%users)
			}
			return out
		}
		run := func(b *testing.B, name string, each func(i int) int) {
			b.Run(fmt.Sprintf("%s/descriptors=%d", name, descs), func(b *testing.B) {
				before := peerStats(nodes)
				calls := 0
				b.ResetTimer()
				for i := range b.N {
					calls += each(i)
				}
				b.StopTimer()
				after := peerStats(nodes)
				msgs, items := after.CheckRPCs-before.CheckRPCs, after.ForwardedItems-before.ForwardedItems
				b.ReportMetric(float64(msgs)/float64(b.N), "peer-msgs/call")
				if msgs > 0 {
					b.ReportMetric(float64(items)/float64(msgs), "items/peer-msg")
				}
				b.ReportMetric(float64(calls)/float64(b.N), "rls-calls/call")
				b.ReportMetric(0, "ns/op")
			})
		}
		call := func(b *testing.B, api rlsv3.RateLimitServiceClient, users ...string) {
			if resp := shouldRateLimit(b, api, usersReq(users...)); resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				b.Fatalf("%v", resp)
			}
		}
		run(b, "batched", func(i int) int {
			call(b, apis[i%len(apis)], descriptors(i)...)
			return 1
		})
		run(b, "per-descriptor", func(i int) int {
			for j, u := range descriptors(i) {
				call(b, apis[(i+j)%len(apis)], u)
			}
			return descs
		})
		run(b, "owner", func(i int) int {
			o := i % len(nodes)
			us := make([]string, descs)
			for j := range us {
				us[j] = byOwner[o][(i*descs+j)%len(byOwner[o])]
			}
			call(b, apis[o], us...)
			return 1
		})
	}
}
