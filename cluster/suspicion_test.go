package cluster_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

// stateIn returns the state of member name in n's snapshot ("absent" when
// it is not listed).
func stateIn(n *testNode, name string) string {
	m, ok := n.Snapshot().Member(name)
	if !ok {
		return "absent"
	}
	return m.State.String()
}

// A member that stops answering probes (its gossip packets muted;
// memberlist still reaches it by TCP, so it is never declared dead) is
// reported Suspect by the others' snapshots, State and OnChange, and
// Alive again once it answers.
func TestMutedMemberIsSuspectThenAlive(t *testing.T) {
	nodes, meta := startChain(t, 3)
	waitFor(t, 10*time.Second, "convergence", func() bool { return converged(nodes, nodes, meta) })
	muted, others := nodes[2], nodes[:2]
	name := muted.LocalName()

	muted.MuteGossip(true)
	took := waitFor(t, 10*time.Second, "the others report the muted node suspect", func() bool {
		for _, n := range others {
			if stateIn(n, name) != "suspect" {
				return false
			}
		}
		return true
	})
	t.Logf("suspect %v after the mute", took.Round(time.Millisecond))
	for _, n := range others {
		if st, ok := n.State(name); !ok || st != cluster.Suspect {
			t.Fatalf("%s: State(%s) = %v, %v, want suspect", n.LocalName(), name, st, ok)
		}
		waitFor(t, 2*time.Second, n.LocalName()+"'s OnChange sees the suspect", func() bool {
			got := n.received()
			m, ok := got[len(got)-1].Member(name)
			return ok && m.State == cluster.Suspect
		})
	}

	muted.MuteGossip(false)
	waitFor(t, 10*time.Second, "every node alive again", func() bool { return converged(nodes, nodes, meta) })
	for _, n := range nodes {
		checkVersions(t, n)
	}
}

// A crashed member is suspect before memberlist declares it dead.
func TestCrashedMemberIsSuspectBeforeDead(t *testing.T) {
	nodes, meta := startChain(t, 3)
	waitFor(t, 10*time.Second, "convergence", func() bool { return converged(nodes, nodes, meta) })
	crashed, n := nodes[2], nodes[0]
	name := crashed.LocalName()

	crashed.stop() // Shutdown without Leave
	var seen []string
	waitFor(t, 15*time.Second, "the crashed node is dropped", func() bool {
		st := stateIn(n, name)
		if len(seen) == 0 || seen[len(seen)-1] != st {
			seen = append(seen, st)
		}
		return st == "absent"
	})
	if want := []string{"alive", "suspect", "absent"}; len(seen) != 3 || seen[0] != want[0] && seen[0] != want[1] || seen[1] != "suspect" {
		t.Fatalf("%s saw %s go %v, want %v", n.LocalName(), name, seen, want)
	}
	// Every survivor drops it too, so that no memberlist probe of it is
	// in flight when the test ends (memberlist's Shutdown does not wait
	// for one).
	waitFor(t, 15*time.Second, "the survivors converge", func() bool { return converged(nodes[:2], nodes[:2], meta) })
}
