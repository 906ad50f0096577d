package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/store"
)

// Peer calls are taken from the members of the ring and from those that
// left it lately (a leaver still hands off and forwards), and refused
// (ErrNotMember) from anyone else, this node's own name included.
func TestPeerCallsFromNonMembersRefused(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	l := c.Node("n0")
	ctx := context.Background()
	items := []limiter.Forwarded{{Hash: 42, Limit: tb(10, time.Hour), Cost: 10}}
	out := make([]limiter.Answer, 1)
	for _, from := range []string{"evil", "", "n0"} {
		if err := l.CheckForwarded(ctx, from, 1, items, out); !errors.Is(err, limiter.ErrNotMember) {
			t.Errorf("CheckForwarded from %q: %v, want ErrNotMember", from, err)
		}
		if _, _, err := l.AcquireForwarded(ctx, from, 1, items[0], time.Second); !errors.Is(err, limiter.ErrNotMember) {
			t.Errorf("AcquireForwarded from %q: %v, want ErrNotMember", from, err)
		}
		if _, _, err := l.ReleaseForwarded(ctx, from, 1, items[0], store.LeaseID{ID: 1}); !errors.Is(err, limiter.ErrNotMember) {
			t.Errorf("ReleaseForwarded from %q: %v, want ErrNotMember", from, err)
		}
	}
	if err := l.CheckForwarded(ctx, "n1", 1, items, out); err != nil || !out[0].Allowed {
		t.Fatalf("CheckForwarded from member n1: %v %+v", err, out[0])
	}
	// The refused calls spent nothing: n1's call took the whole bucket.
	// Once n2 has left the ring it may still forward (it is draining).
	c.SetRing("n0", "n0", "n1")
	if err := l.CheckForwarded(ctx, "n2", 1, items, out); err != nil {
		t.Fatalf("CheckForwarded from n2, just departed: %v", err)
	}
	if out[0].Allowed {
		t.Fatalf("the bucket n1 emptied allows again: %+v", out[0])
	}
	// Fetch from a stranger: refused for a key held here, and the key
	// keeps its count; answered empty for keys not held.
	if _, err := l.FetchMoved(ctx, "evil", []uint64{42}); !errors.Is(err, limiter.ErrNotMember) {
		t.Fatalf("FetchMoved of a held key by a stranger: %v, want ErrNotMember", err)
	}
	if got, err := l.FetchMoved(ctx, "evil", []uint64{7}); err != nil || len(got) != 0 {
		t.Fatalf("FetchMoved of a key not held, by a stranger: %v, %v; want nothing", got, err)
	}
	if err := l.CheckForwarded(ctx, "n1", 1, []limiter.Forwarded{{Hash: 42, Limit: tb(10, time.Hour), Cost: 1}}, out); err != nil || out[0].Allowed {
		t.Fatalf("after the stranger's fetch: %v %+v, want denied", err, out[0])
	}
}

// A node alone (a cluster of one, as `sluice serve` with no flags starts)
// takes no states from a caller its ring does not have: an attacker who
// reaches its peer port cannot plant an exhausted or a refilled counter
// with one Handoff, whatever name it gives. Nothing is merged.
func TestHandoffFromNonMemberRefusedOnNodeAlone(t *testing.T) {
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.PeersAuthenticated = false }, "n0")
	l := c.Node("n0")
	req := limiter.Request{Key: "victim", Limit: hourly, Cost: 1}
	before := remaining(t, c, "n0", req)
	exhausted := store.Entry{Key: identity.Inline(uint8(hourly.Algorithm), hourly.Period, "victim"), Algorithm: hourly.Algorithm,
		Token: bucket.TokenState{TAT: c.Clock.Now().Add(100 * time.Hour).UnixNano()}}
	for _, from := range []string{"evil", "n1", "", "n0"} {
		if _, err := l.AcceptHandoff(context.Background(), from, []store.Entry{exhausted}, nil); !errors.Is(err, limiter.ErrNotMember) {
			t.Errorf("Handoff from %q to a node alone: %v, want ErrNotMember", from, err)
		}
	}
	if after := remaining(t, c, "n0", req); after != before {
		t.Fatalf("after the refused handoffs: %d remaining, want %d (the planted state was merged)", after, before)
	}
}

// Where peer calls are authenticated (the cluster secret, peer mTLS), a
// node not yet in a multi-node ring takes the states of a caller its ring
// does not have yet: nodes that saw it join hand it their keys first, and
// its first checks count on them. Once in a multi-node ring it takes
// states from members only.
func TestHandoffFromAuthenticatedPeerTakenWhileUnclustered(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0")
	l := c.Node("n0")
	req := limiter.Request{Key: "victim", Limit: hourly, Cost: 1}
	exhausted := store.Entry{Key: identity.Inline(uint8(hourly.Algorithm), hourly.Period, "victim"), Algorithm: hourly.Algorithm,
		Token: bucket.TokenState{TAT: c.Clock.Now().Add(100 * time.Hour).UnixNano()}}
	if _, err := l.AcceptHandoff(context.Background(), "n1", []store.Entry{exhausted}, nil); err != nil {
		t.Fatalf("Handoff from n1 to a node not yet clustered: %v", err)
	}
	if after := remaining(t, c, "n0", req); after != 0 {
		t.Fatalf("after the handoff: %d remaining, want 0 (the handed state was not merged)", after)
	}
	c.Add("n2")
	c.SetRing("n0", "n0", "n2")
	if _, err := l.AcceptHandoff(context.Background(), "evil", []store.Entry{exhausted}, nil); !errors.Is(err, limiter.ErrNotMember) {
		t.Fatalf("Handoff from a non-member to a clustered node: %v, want ErrNotMember", err)
	}
}
