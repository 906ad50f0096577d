package node_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/bench"
	"github.com/sluice-rl/sluice/node"
)

// rlsOwner is the member that owns the counter of descriptor [(user, u)]
// in domain web under rlsYAML(rpu, "hour"), by the routed client's ring:
// the counter key is rls.CounterKey's "web_user_<u>_", a FixedWindowHits
// limit of the rule's period.
func rlsOwner(t testing.TB, c *client.Client, u string, rpu int64) client.Member {
	t.Helper()
	m, err := c.Owner(context.Background(), "web_user_"+u+"_", "",
		client.Limit{Algorithm: client.FixedWindowHits, Limit: rpu, Period: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// routedClient is a client that routes to owners (and so knows the ring).
func routedClient(t testing.TB, addrs ...string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Addrs: addrs, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// usersByOwner returns n users of each node's name whose descriptor
// [(user, <user>)] that node owns.
func usersByOwner(t testing.TB, c *client.Client, nodes []*node.Node, n int, rpu int64) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for i := 0; i < 10_000; i++ {
		u := fmt.Sprintf("u%d", i)
		m := rlsOwner(t, c, u, rpu)
		if len(out[m.Name]) < n {
			out[m.Name] = append(out[m.Name], u)
		}
		full := true
		for _, nd := range nodes {
			full = full && len(out[nd.Name()]) == n
		}
		if full {
			return out
		}
	}
	t.Fatalf("no %d users for each node: %v", n, out)
	return nil
}

// usersReq is one ShouldRateLimit of a descriptor [(user, u)] per user.
func usersReq(users ...string) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: "web"}
	for _, u := range users {
		req.Descriptors = append(req.Descriptors, &rlcommon.RateLimitDescriptor{
			Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "user", Value: u}}})
	}
	return req
}

// TestRLSToOwner: an RLS call sent to the node that owns all its
// descriptors (found with client.Owner) makes no peer call; sent to
// another node, its descriptors go out in one batched call to their
// owner; a call whose descriptors have three owners makes one call to
// each other owner. client.Owner agrees with the owner the nodes name.
func TestRLSToOwner(t *testing.T) {
	const rpu = 1000
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "web.yaml"), rlsYAML(rpu, "hour"))
	tc := newTestCluster0(t, 3, func(c *node.Config) { c.RLSConfig = dir })
	c := routedClient(t, tc.nodes[0].GRPCAddr())
	const per = 5
	users := usersByOwner(t, c, tc.nodes, per, rpu)
	// The nodes agree: each user's counter is owned where the client says.
	lim := client.Limit{Algorithm: client.FixedWindowHits, Limit: rpu, Period: time.Hour}
	plain := newClient(t, tc.nodes[1].GRPCAddr())
	for name, us := range users {
		if got := ownerOf(t, plain, "web_user_"+us[0]+"_", lim).Owner; got != name {
			t.Fatalf("client.Owner says %s owns user %s, the nodes say %s", name, us[0], got)
		}
	}

	// call sends req to n and returns the peer Check RPCs and items n sent.
	call := func(n *node.Node, req *rlsv3.RateLimitRequest) (rpcs, items uint64) {
		t.Helper()
		before := n.PeerStats()
		resp := shouldRateLimit(t, rlsClient(t, n.GRPCAddr()), req)
		after := n.PeerStats()
		if len(resp.GetStatuses()) != len(req.GetDescriptors()) || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("%s: %v", n.Name(), resp)
		}
		for i, st := range resp.GetStatuses() {
			if st.GetCurrentLimit().GetRequestsPerUnit() != rpu {
				t.Fatalf("%s: descriptor %d: %v, want the rule's limit", n.Name(), i, st)
			}
		}
		return after.CheckRPCs - before.CheckRPCs, after.ForwardedItems - before.ForwardedItems
	}
	for _, owner := range tc.nodes {
		req := usersReq(users[owner.Name()]...)
		if rpcs, items := call(owner, req); rpcs != 0 || items != 0 {
			t.Errorf("%d descriptors sent to their owner %s: %d peer RPCs with %d items, want none", per, owner.Name(), rpcs, items)
		}
		for _, other := range tc.nodes {
			if other == owner {
				continue
			}
			if rpcs, items := call(other, req); rpcs != 1 || items != per {
				t.Errorf("%d descriptors of %s sent to %s: %d peer RPCs with %d items, want 1 with %d", per, owner.Name(), other.Name(), rpcs, items, per)
			}
		}
	}
	var mixed []string
	for _, n := range tc.nodes {
		mixed = append(mixed, users[n.Name()][:2]...)
	}
	for _, n := range tc.nodes {
		if rpcs, items := call(n, usersReq(mixed...)); rpcs != 2 || items != 4 {
			t.Errorf("6 descriptors of 3 owners sent to %s: %d peer RPCs with %d items, want 2 (one per other owner) with 4", n.Name(), rpcs, items)
		}
	}

	// benchcompare's sluice-owner: the bench's RLS target routed by
	// bench.SluiceRLSOwner reaches each descriptor's owner, so no node
	// forwards.
	tg, err := bench.NewRLSTarget(bench.RLSConfig{Domain: "web", Key: "user", Owner: bench.SluiceRLSOwner(c, time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	before := peerStats(tc.nodes)
	allowed := make([]bool, 1)
	for i := range 60 {
		if err := tg.Check(context.Background(), []string{fmt.Sprintf("bench-%d", i)}, allowed); err != nil || !allowed[0] {
			t.Fatalf("bench target, call %d: %v, allowed %v", i, err, allowed[0])
		}
	}
	if after := peerStats(tc.nodes); after.CheckRPCs != before.CheckRPCs {
		t.Errorf("60 calls of the owner-routed bench target: %d peer RPCs, want none", after.CheckRPCs-before.CheckRPCs)
	}
}
