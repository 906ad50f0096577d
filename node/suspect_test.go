package node_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// stateOf returns the state node c's Membership API shows for member name
// ("absent" when not listed).
func stateOf(t *testing.T, c *client.Client, name string) string {
	t.Helper()
	_, ms, err := c.Members(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == name {
			return m.State
		}
	}
	return "absent"
}

// A member that stops answering probes (its gossip packets muted; its
// gRPC port still answers, and memberlist keeps it a member) is suspect
// to the others within a few probe intervals: the Membership API and
// sluice_members show it, the ring keeps it, and its keys are answered by
// their failure mode at once, without a call to it. When it answers again
// it is alive and its keys go to it again, with its count untouched.
func TestSuspectMemberAnsweredByFallback(t *testing.T) {
	tc := newTestCluster(t, 3)
	n, owner := tc.nodes[0], tc.nodes[2]
	c := newClient(t, n.GRPCAddr())
	lim := client.Limit{Limit: 30, Period: time.Hour, FailureMode: client.FailLocal} // local share 10
	key := keysOwnedBy(t, c, owner.Name(), "sus", 1, lim)[0]
	check := func() client.Result {
		t.Helper()
		res, err := c.Check(context.Background(), client.Item{Key: key, Limit: lim, Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := check(); r.Source != "owner" || r.Remaining != 29 {
		t.Fatalf("before: %+v, want the owner's answer, 29 remaining", r)
	}
	if got := sample(scrape(t, n), `sluice_members{state="suspect"}`); got != "0" {
		t.Fatalf(`sluice_members{state="suspect"} = %q before the fault, want 0`, got)
	}

	start := time.Now()
	owner.Inject(node.FaultGossipMute)
	waitFor(t, 10*time.Second, owner.Name()+" suspect", func() bool { return stateOf(t, c, owner.Name()) == "suspect" })
	// The limiter hears of it from the snapshot delivered after the
	// cluster's settle delay.
	waitFor(t, 5*time.Second, "the limiter told", func() bool { return slices.Contains(n.Limiter().Suspects(), owner.Name()) })
	t.Logf("%s suspect %v after the mute", owner.Name(), time.Since(start).Round(time.Millisecond))
	if got := sample(scrape(t, n), `sluice_members{state="suspect"}`); got != "1" {
		t.Errorf(`sluice_members{state="suspect"} = %q, want 1`, got)
	}
	if _, ok := n.Limiter().Ring().Member(owner.Name()); !ok {
		t.Fatalf("%s dropped from the ring while only suspect", owner.Name())
	}

	forwarded := n.PeerStats().ForwardedItems
	allowed := 0
	for i := range 12 {
		r := check()
		if r.Source != "fallback" || r.Owner != owner.Name() || r.Err != nil {
			t.Fatalf("check %d while %s is suspect: %+v, want a fallback", i, owner.Name(), r)
		}
		if r.Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 12 allowed by the local share, want 10", allowed)
	}
	if got := n.PeerStats().ForwardedItems; got != forwarded {
		t.Errorf("%d items forwarded while the owner was suspect, want none", got-forwarded)
	}

	owner.Inject(node.FaultGossipUnmute)
	waitFor(t, 10*time.Second, owner.Name()+" alive again", func() bool { return stateOf(t, c, owner.Name()) == "alive" })
	waitFor(t, 5*time.Second, "the limiter told", func() bool { return len(n.Limiter().Suspects()) == 0 })
	if r := check(); r.Source != "owner" || r.Err != nil {
		t.Fatalf("after the suspicion: %+v, want the owner's answer", r)
	}
	if got := sample(scrape(t, n), `sluice_members{state="suspect"}`); got != "0" {
		t.Errorf(`sluice_members{state="suspect"} = %q after, want 0`, got)
	}
}
