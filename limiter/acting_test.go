package limiter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// heirOf returns the other two nodes of a three-node cluster of a, b and
// c, the first heir of key (owned by a) first: the heir is the owner once
// a has left.
func heirOf(t *testing.T, key string) (heir, other string) {
	t.Helper()
	c := limitertest.NewCluster(t, nil, "b", "c")
	if c.Owner("b", limiter.Request{Key: key, Limit: hourly}) == "b" {
		return "b", "c"
	}
	return "c", "b"
}

// admitted checks key n times through node on and returns how many were
// allowed.
func admitted(c *limitertest.Cluster, on, key string, n int) int {
	got := 0
	for i := 0; i < n; i++ {
		if r := c.Check(on, limiter.Request{Key: key, Limit: hourly, Cost: 1})[0]; r.Allowed {
			got++
		}
	}
	return got
}

// spentOnA builds a cluster of a, b and c (configured by configure), finds
// a key that a owns, spends 60 of its 100 there and runs a's replication
// round, so the key's heir holds a copy at 60. It returns the key's heir
// and the other node too.
func spentOnA(t *testing.T, configure func(*limiter.Config)) (c *limitertest.Cluster, key, heir, other string) {
	t.Helper()
	c = limitertest.NewCluster(t, configure, "a", "b", "c")
	key = c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 1)[0]
	heir, other = heirOf(t, key)
	spend(t, c, "a", []string{key}, hourly, 60)
	c.Node("a").Replicate(context.Background())
	return c, key, heir, other
}

// While a killed owner is still in the rings, the other nodes send its
// keys' checks to the keys' first heir, which decides them on its copy:
// a key spent to 60 of 100 admits 40 more in all, not a local share per
// node on top of a fresh count. Once the ring moves the key to the heir
// and it reconciles, its count is the 100 admitted. Without replication
// the same steps admit a share on each node, and the key starts afresh.
func TestHeirActsForKilledOwner(t *testing.T) {
	for _, tc := range []struct {
		name           string
		configure      func(*limiter.Config)
		during, others int   // admitted during the outage: through the heir, the other node
		after          int64 // remaining once the heir owns the key
	}{
		{"replicated", nil, 40, 0, 0},
		{"local shares", noReplicas, 33, 33, 100 - 66},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, key, heir, other := spentOnA(t, tc.configure)
			c.Remove("a") // kill -9, not yet seen by gossip
			got := admitted(c, other, key, 50) + admitted(c, heir, key, 50)
			if got != tc.during+tc.others {
				t.Errorf("admitted %d while the owner was dead in the rings, want %d", got, tc.during+tc.others)
			}
			c.SetMembers("b", "c")
			if tc.configure == nil {
				// Before any reconciliation: the heir took over its copy
				// with what it admitted acting.
				if bad := remainingOrFallback(t, c, other, []string{key}, hourly, tc.after, false); len(bad) > 0 {
					t.Errorf("once the heir owns the key, want %d remaining: %v", tc.after, bad)
				}
			}
			for _, n := range []string{"b", "c"} {
				c.Node(n).Reconcile(context.Background())
			}
			if bad := remainingOrFallback(t, c, other, []string{key}, hourly, tc.after, false); len(bad) > 0 {
				t.Errorf("once the heir owns the key and reports are in, want %d remaining: %v", tc.after, bad)
			}
		})
	}
}

// An owner cut off from one node only keeps counting; that node's checks
// go to the heir, which reports what it admitted to the owner, so the
// owner's count has both once they reconcile.
func TestHeirActsForCutOffOwner(t *testing.T) {
	c, key, heir, other := spentOnA(t, nil)
	c.Net.Cut(other, "a")
	if got := admitted(c, other, key, 10); got != 10 {
		t.Fatalf("%d of 10 admitted through the heir, want 10", got)
	}
	r := c.Check(other, limiter.Request{Key: key, Limit: hourly})[0]
	if r.Source != limiter.SourceFallback || r.Owner != "a" || r.Remaining != 30 {
		t.Errorf("read through %s: %+v, want fallback naming owner a, 30 remaining (the heir's copy less 10)", other, r)
	}
	c.Node(heir).Reconcile(context.Background())
	if bad := remainingOrFallback(t, c, "a", []string{key}, hourly, 30, false); len(bad) > 0 {
		t.Errorf("owner after the heir's report, want 30: %v", bad)
	}
}

// A killed owner's heir whose ring still has the owner, asked by a node
// whose ring has dropped it (and so names the heir the owner), decides the
// checks on its copy as it does when acting, and grants nothing: deciding
// them on its own store, which holds nothing of the key yet, counted the
// key afresh (the fault test's kill -9: grants of 7 tokens from the heir
// just before its ring changed, on a key spent to its limit).
func TestHeirNotYetOwnerDecidesOnItsCopy(t *testing.T) {
	c, key, heir, other := spentOnA(t, nil)
	c.Remove("a")                 // kill -9
	c.SetRing(other, other, heir) // other's ring drops a first; the heir's still has it
	g := c.Check(other, limiter.Request{Key: key, Limit: hourly, Cost: 20, UpTo: true})[0]
	if g.Granted.Tokens != 0 {
		t.Errorf("grant through %s: %d tokens from the heir's store (%+v), want none", other, g.Granted.Tokens, g)
	}
	if got := admitted(c, other, key, 50); got != 40 {
		t.Errorf("admitted %d through %s (its ring names the heir the owner), want 40: the copy's 60 of 100 counted", got, other)
	}
	if got := admitted(c, heir, key, 10); got != 0 {
		t.Errorf("admitted %d more through the heir, want 0", got)
	}
	c.SetMembers(heir, other)
	if bad := remainingOrFallback(t, c, other, []string{key}, hourly, 0, false); len(bad) > 0 {
		t.Errorf("once the heir owns the key, want 0 remaining: %v", bad)
	}
}

// A node that owned a key while its owner was away, and hands it back,
// keeps the state it handed over as its copy when it is the key's heir:
// acting for the owner before the owner's first round of replication
// reaches it (the owner cut off again, or its circuit still open after a
// split), it acts on that count, not from nothing (the fault test's split:
// the heir admitted the whole limit again).
func TestHeirKeepsWhatItHandedBack(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "a", "b", "c")
	key := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 1)[0]
	heir, _ := heirOf(t, key)
	c.SetMembers("b", "c") // a away: the heir owns the key
	spend(t, c, heir, []string{key}, hourly, 60)
	c.SetMembers("a", "b", "c") // a back: the heir hands the key to it
	if bad := remainingOrFallback(t, c, "a", []string{key}, hourly, 40, false); len(bad) > 0 {
		t.Fatalf("after the handback: %v", bad)
	}
	c.Net.Cut(heir, "a")
	if got := admitted(c, heir, key, 50); got != 40 {
		t.Errorf("the heir, cut off from the owner right after handing the key back, admitted %d, want 40", got)
	}
}

// The heir acts for an owner it cannot reach while it is still handing
// the key to that owner: the state on its way there (out of the heir's
// store, see transit) is what it acts on, not nothing.
func TestHeirActsOnWhatItIsHandingBack(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "a", "b", "c")
	key := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 1)[0]
	heir, other := heirOf(t, key)
	c.SetMembers("b", "c") // a away: the heir owns the key
	spend(t, c, heir, []string{key}, hourly, 60)
	for _, n := range []string{"a", heir, other} {
		c.SetRing(n, "a", "b", "c") // a back
	}
	got := -1
	c.Net.BeforeHandoff(heir, "a", func() {
		c.Net.Cut(heir, "a") // the push is on its way; checks are not
		got = admitted(c, heir, key, 50)
	})
	// The push lands; the acknowledgements after it do not (the cut).
	if _, err := c.HandOff(heir); !errors.Is(err, limiter.ErrPeerUnavailable) {
		t.Fatalf("%s: HandOff: %v, want an error wrapping ErrPeerUnavailable (its acknowledgements to a are cut off)", heir, err)
	}
	if got != 40 {
		t.Errorf("the heir, acting for the owner while handing it the key, admitted %d, want 40", got)
	}
}

// An heir refuses a key it holds a copy of to a node it has not seen join
// (a new node, or one restarted after its departure was forgotten), as it
// refuses a state in its store: answered empty, that node would count the
// key afresh (the fault test's graceful restarts: the restarted node asked
// every node for a key, the heir among them, and all answered empty).
func TestHeirRefusesAStrangerTheKeyItHoldsACopyOf(t *testing.T) {
	c, key, heir, _ := spentOnA(t, nil)
	hash := identity.Inline(uint8(hourly.Algorithm), hourly.Period, key)
	if got, err := c.Node(heir).FetchMoved(context.Background(), "d", []uint64{hash}); !errors.Is(err, limiter.ErrNotMember) {
		t.Fatalf("d, unknown to the heir %s, fetching %s: %v, %v; want ErrNotMember", heir, key, got, err)
	}
	if got, err := c.Node(heir).FetchMoved(context.Background(), "a", []uint64{hash}); err != nil || len(got) != 1 {
		t.Fatalf("a fetching %s from its heir %s: %v, %v; want its copy", key, heir, got, err)
	}
}

// A key's owner that gives its state to a node fetching it keeps a copy,
// as an heir does: if that node cannot be reached next, the owner acts
// for it on the copy, not from nothing. The fault test's graceful leave
// at 32 of 30: the heir, owner once the leaving node was gone from its
// ring, gave the key to that node (still fetching on its old ring), then
// acted for it from nothing until the node's handoff brought it back.
func TestOwnerKeepsACopyOfWhatItGivesAFetcher(t *testing.T) {
	c, key, heir, other := spentOnA(t, nil)
	c.SetRing(heir, heir, other) // a leaves: the heir owns the key, on its copy
	hash := identity.Inline(uint8(hourly.Algorithm), hourly.Period, key)
	got, err := c.Node(heir).FetchMoved(context.Background(), "a", []uint64{hash})
	if err != nil || len(got) != 1 {
		t.Fatalf("a, leaving, fetching %s from %s: %v, %v; want its state", key, heir, got, err)
	}
	c.Net.Isolate("a") // a stops with the key; its handoff is not here yet
	if n := admitted(c, heir, key, 50); n != 40 {
		t.Errorf("admitted %d through %s after a took the key, want 40", n, heir)
	}
}

// An heir keeps its copy when another node fetches the key: the owner
// asking the heir for a partition still pending on its ring takes the copy
// (it merges into the state it holds), and the heir must still have it if
// the owner then becomes unreachable, or it would act for the owner from
// nothing. As the fault test saw it in a graceful leave.
func TestHeirKeepsItsCopyWhenFetched(t *testing.T) {
	c, key, heir, other := spentOnA(t, nil)
	hash := identity.Inline(uint8(hourly.Algorithm), hourly.Period, key)
	got, err := c.Node(heir).FetchMoved(context.Background(), "a", []uint64{hash})
	if err != nil || len(got) != 1 {
		t.Fatalf("a fetching %s from its heir %s: %v, %v; want its copy", key, heir, got, err)
	}
	c.Remove("a") // it leaves after that, or is killed: not yet seen by gossip
	if n := admitted(c, other, key, 50); n != 40 {
		t.Errorf("admitted %d through %s acting on %s's copy, want 40", n, heir, key)
	}
}
