package transport

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
)

// The peer calls of a hand-written client, as found by the security
// review (issue 13): each is what a process that reaches the peer port, or
// a member gone wrong, could send.

// rogueTarget is a real limiter named "owner" on a ring of owner and "a"
// (a node it never needs to reach: nothing is pending), served over gRPC.
type rogueTarget struct {
	l    *limiter.Limiter
	peer sluicev1.PeerClient
	mine []uint64 // hashes the ring gives to owner
	a    []uint64 // hashes the ring gives to a
	reg  *prometheus.Registry
}

// metric returns the value of the limiter's counter name (0 if absent).
func (rt *rogueTarget) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := rt.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

func newRogueTarget(t *testing.T) *rogueTarget {
	t.Helper()
	pc := newTestPeerClient(t, PeerClientConfig{Self: "owner", Timeout: 200 * time.Millisecond})
	reg := prometheus.NewRegistry()
	l, err := limiter.New(limiter.Config{NodeName: "owner", Peers: pc, PendingTTL: time.Nanosecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetMembers([]ring.Member{{Name: "owner", GRPCAddr: "127.0.0.1:1"}, {Name: "a", GRPCAddr: closedAddr(t)}}); err != nil {
		t.Fatal(err)
	}
	m, _ := startPeerServer(t, "owner", l)
	rt := &rogueTarget{l: l, peer: rawPeerClient(t, m), reg: reg}
	for h := uint64(1); len(rt.mine) < 4 || len(rt.a) < 4; h++ {
		if o, _ := l.Ring().Owner(h); o.Name == "owner" {
			rt.mine = append(rt.mine, h)
		} else {
			rt.a = append(rt.a, h)
		}
	}
	return rt
}

// check spends cost of 100/min on hash through Peer.Check from node a.
func (rt *rogueTarget) check(t *testing.T, hash uint64, cost int64) *sluicev1.PeerResult {
	t.Helper()
	resp, err := rt.peer.Check(context.Background(), &sluicev1.PeerCheckRequest{From: "a", Hops: 1, Items: []*sluicev1.PeerItem{tokenItem(hash, 100, cost)}})
	if err != nil {
		t.Fatalf("Peer.Check from a: %v", err)
	}
	return resp.GetResults()[0]
}

// An exhausted key stays exhausted whatever a caller that is not a member
// of the ring sends: Fetch (which used to hand the state over and leave
// the key counted afresh, 200 allowed where 100 should be), Check and
// Handoff are refused with PermissionDenied.
func TestPeerRefusesNonMembers(t *testing.T) {
	rt := newRogueTarget(t)
	ctx := context.Background()
	key := rt.mine[0]
	if r := rt.check(t, key, 100); !r.GetAllowed() {
		t.Fatalf("spending the bucket: %+v", r)
	}
	for _, from := range []string{"evil", "", "owner"} {
		_, err := rt.peer.Fetch(ctx, &sluicev1.FetchRequest{From: from, Hashes: []uint64{key}})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("Fetch from %q: %v, want PermissionDenied", from, err)
		}
		_, err = rt.peer.Check(ctx, &sluicev1.PeerCheckRequest{From: from, Items: []*sluicev1.PeerItem{tokenItem(rt.mine[1], 100, 100)}})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("Check from %q: %v, want PermissionDenied", from, err)
		}
		_, err = rt.peer.Handoff(ctx, &sluicev1.HandoffRequest{From: from, States: []*sluicev1.KeyState{{
			Hash: rt.mine[2], Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Tat: time.Now().Add(time.Hour).UnixNano()}}})
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("Handoff from %q: %v, want PermissionDenied", from, err)
		}
	}
	if r := rt.check(t, key, 1); r.GetAllowed() {
		t.Fatalf("after the refused calls the exhausted key allows again: %+v", r)
	}
	if r := rt.check(t, rt.mine[1], 100); !r.GetAllowed() {
		t.Fatalf("a key a refused Check named was drained: %+v", r)
	}
	if r := rt.check(t, rt.mine[2], 100); !r.GetAllowed() {
		t.Fatalf("a refused Handoff was applied: %+v", r)
	}
	if got := rt.metric(t, "sluice_peer_refused_total"); got != 9 {
		t.Errorf("sluice_peer_refused_total = %v, want 9", got)
	}
}

// A member's handoff is validated before it is applied: a token state 100
// years ahead (which locked the key out, Retry-After 3153599946 s) leaves
// the key usable within its limit's period, a window that starts in the
// future is dropped and counted, and a call with more than
// MaxHandoffStates states is refused before any is applied.
func TestPeerHandoffValidated(t *testing.T) {
	rt := newRogueTarget(t)
	ctx := context.Background()
	now := time.Now()
	century := now.Add(100 * 365 * 24 * time.Hour).UnixNano()
	_, err := rt.peer.Handoff(ctx, &sluicev1.HandoffRequest{From: "a", States: []*sluicev1.KeyState{
		{Hash: rt.mine[0], Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Tat: century},
		{Hash: rt.mine[1], Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, WindowStart: century, WindowExpires: century + int64(time.Minute), WindowCur: 100},
		{Hash: rt.mine[2], Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Tat: now.Add(30 * time.Second).UnixNano()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r := rt.check(t, rt.mine[0], 1)
	if ra := time.Duration(r.GetRetryAfterNs()); ra > time.Minute || time.Duration(r.GetResetAfterNs()) > time.Minute {
		t.Fatalf("a state 100 years ahead locks the key out: %+v (retry after %v)", r, ra)
	}
	if got := rt.metric(t, "sluice_store_clamped_states_total"); got != 1 {
		t.Errorf("sluice_store_clamped_states_total = %v, want 1", got)
	}
	fixed := &sluicev1.PeerItem{Hash: rt.mine[1], Cost: 1, Limit: &sluicev1.PeerLimit{
		Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 100, PeriodNs: int64(time.Minute)}}
	resp, err := rt.peer.Check(ctx, &sluicev1.PeerCheckRequest{From: "a", Hops: 1, Items: []*sluicev1.PeerItem{fixed}})
	if err != nil || !resp.GetResults()[0].GetAllowed() {
		t.Fatalf("a window starting in 100 years was applied: %+v, %v", resp, err)
	}
	if got := rt.metric(t, "sluice_invalid_states_total"); got != 1 {
		t.Errorf("sluice_invalid_states_total = %v, want 1", got)
	}
	// The valid state was applied: half the bucket is spent.
	if r := rt.check(t, rt.mine[2], 0); r.GetRemaining() > 51 || r.GetRemaining() < 45 {
		t.Errorf("valid state: remaining %d, want about 50", r.GetRemaining())
	}

	many := make([]*sluicev1.KeyState, 100_000)
	for i := range many {
		many[i] = &sluicev1.KeyState{Hash: rt.a[0] + uint64(i), Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Tat: now.Add(time.Second).UnixNano()}
	}
	_, err = rt.peer.Handoff(ctx, &sluicev1.HandoffRequest{From: "a", States: many})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Handoff of 100,000 states: %v, want InvalidArgument", err)
	}
	if keys := rt.l.Store().Stats().Keys; keys > 3 {
		t.Fatalf("store holds %d keys after the refused handoff", keys)
	}
}

// A member may fetch the keys it could be taking over: those the ring
// gives it (moved there), and those the ring gives this node, which then
// forwards their checks to the fetcher rather than count them afresh.
func TestPeerFetchByMember(t *testing.T) {
	rt := newRogueTarget(t)
	ctx := context.Background()
	if r := rt.check(t, rt.mine[0], 100); !r.GetAllowed() {
		t.Fatalf("spending: %+v", r)
	}
	resp, err := rt.peer.Fetch(ctx, &sluicev1.FetchRequest{From: "a", Hashes: []uint64{rt.mine[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetStates()) != 1 {
		t.Fatalf("Fetch from a: %d states, want 1", len(resp.GetStates()))
	}
	// A key the ring gives to neither a nor this node is not a's to take;
	// with two members there is none, so ask for a hash twice: served once.
	resp, err = rt.peer.Fetch(ctx, &sluicev1.FetchRequest{From: "a", Hashes: []uint64{rt.a[0], rt.mine[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetStates()) != 0 {
		t.Fatalf("second Fetch: %d states, want 0 (moved already, nothing of a's here)", len(resp.GetStates()))
	}
}
