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

// servedChecks is the number of Check calls node n served for other
// nodes (sluice_peer_served_duration_seconds_count{method="Check"}).
func servedChecks(t *testing.T, n *node.Node) string {
	t.Helper()
	return sample(scrape(t, n), `sluice_peer_served_duration_seconds_count{method="Check"}`)
}

// A member that stops answering probes (its gossip packets muted; its
// gRPC port still answers, and memberlist keeps it a member) is suspect
// to the others within a few probe intervals: the Membership API and
// sluice_members show it, the ring keeps it, and its keys are answered as
// if it were unreachable at once, without a call to it: by the key's heir
// (on its copy of the count) with replication, by the local share
// without. When it answers again it is alive and its keys go to it again.
func TestSuspectMemberAnsweredByFallback(t *testing.T) {
	for _, tcase := range []struct {
		name     string
		replicas int
		allowed  int // of 12 checks of cost 1, after 1 on the owner, of a limit of 30
	}{
		{"heir", 1, 12},        // the heir's copy: 29 left
		{"local share", 0, 10}, // 30 / 3 nodes
	} {
		t.Run(tcase.name, func(t *testing.T) {
			testSuspectMember(t, tcase.replicas, tcase.allowed)
		})
	}
}

func testSuspectMember(t *testing.T, replicas, wantAllowed int) {
	tc := newTestCluster0(t, 3, func(c *node.Config) { c.Replicas = replicas })
	n, owner := tc.nodes[0], tc.nodes[2]
	c := newClient(t, n.GRPCAddr())
	lim := client.Limit{Limit: 30, Period: time.Hour, FailureMode: client.FailLocal}
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
	if replicas > 0 { // the heir's copy of the owner's count
		waitFor(t, 5*time.Second, "the owner's count replicated", func() bool {
			got := sample(scrape(t, owner), "sluice_replica_states_sent_total")
			return got != "" && got != "0"
		})
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

	served := servedChecks(t, owner)
	allowed := 0
	start = time.Now()
	for i := range 12 {
		r := check()
		if r.Source != "fallback" || r.Owner != owner.Name() || r.Err != nil {
			t.Fatalf("check %d while %s is suspect: %+v, want a fallback", i, owner.Name(), r)
		}
		if r.Allowed {
			allowed++
		}
	}
	t.Logf("12 checks of a suspect owner's key answered in %v", time.Since(start).Round(time.Millisecond))
	if allowed != wantAllowed {
		t.Errorf("%d of 12 allowed, want %d", allowed, wantAllowed)
	}
	if got := servedChecks(t, owner); got != served {
		t.Errorf("the suspect owner served Check calls: %s, then %s; want none", served, got)
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
