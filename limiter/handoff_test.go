package limiter_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// step is one move of a membership scenario on a limitertest.Cluster.
type step struct {
	what string
	do   func(c *limitertest.Cluster) error
	read string // if set, instead of do: every key must read 40 through this node
	// fallbackOK: a key may also be answered by its failure mode (read
	// through a newcomer the owners have not seen yet: they refuse its
	// peer calls), but never counted afresh.
	fallbackOK bool
}

// onRing gives node on the ring of members, without a handoff (a gossip
// change seen by one node).
func onRing(on string, members ...string) step {
	return step{what: fmt.Sprintf("%s sees %v", on, members), do: func(c *limitertest.Cluster) error {
		c.SetRing(on, members...)
		return nil
	}}
}

// everyRing gives each of nodes the ring of members.
func everyRing(nodes []string, members ...string) step {
	return step{what: fmt.Sprintf("%v see %v", nodes, members), do: func(c *limitertest.Cluster) error {
		for _, n := range nodes {
			c.SetRing(n, members...)
		}
		return nil
	}}
}

// handOff runs the handoff of each node, in order.
func handOff(nodes ...string) step {
	return step{what: fmt.Sprintf("%v hand off", nodes), do: func(c *limitertest.Cluster) error {
		for _, n := range nodes {
			if _, err := c.HandOff(n); err != nil {
				return fmt.Errorf("%s: HandOff: %w", n, err)
			}
		}
		return nil
	}}
}

// handOffOrRefused runs the handoff of each node, in order, and takes a
// handoff refused by its owner (limiter.ErrPeerUnavailable: an owner that
// has not seen the sender join refuses its states, which the sender
// keeps and pushes again later, as node's handoff loop does).
func handOffOrRefused(nodes ...string) step {
	return step{what: fmt.Sprintf("%v hand off (or are refused)", nodes), do: func(c *limitertest.Cluster) error {
		for _, n := range nodes {
			if _, err := c.HandOff(n); err != nil && !errors.Is(err, limiter.ErrPeerUnavailable) {
				return fmt.Errorf("%s: HandOff: %w", n, err)
			}
		}
		return nil
	}}
}

// leave makes name leave gracefully, seeing others.
func leave(name string, others ...string) step {
	return step{what: fmt.Sprintf("%s leaves, seeing %v", name, others), do: func(c *limitertest.Cluster) error {
		return c.Leave(name, others...)
	}}
}

// add starts a node (on a ring of itself).
func add(name string) step {
	return step{what: "start " + name, do: func(c *limitertest.Cluster) error {
		c.Add(name)
		return nil
	}}
}

// stop removes a node: calls to it fail from now on.
func stop(name string) step {
	return step{what: "stop " + name, do: func(c *limitertest.Cluster) error {
		c.Remove(name)
		return nil
	}}
}

// expect40 reads every scenario key through node on: each must have 40 of
// 100 remaining.
func expect40(on string) step {
	return step{what: "read through " + on, read: on}
}

// expect40OrFallback reads every scenario key through node on, a node
// that some owners have not seen join: each must have 40 of 100 remaining
// or be answered by its failure mode (source fallback), as when the owner
// is unreachable, since the owners refuse the peer calls of a node they
// do not know (limiter.ErrNotMember); never afresh.
func expect40OrFallback(on string) step {
	return step{what: "read through " + on + " (owners may not know it)", read: on, fallbackOK: true}
}

// keysOwnedOnRings returns up to 3 keys (at least 1) that node "n<i>" of
// calc, on the ring it has, gives to owners[i], for each i: keys whose
// owner differs between the rings of a scenario.
func keysOwnedOnRings(t *testing.T, calc *limitertest.Cluster, owners ...string) []string {
	t.Helper()
	var ks []string
	for i := 0; len(ks) < 3 && i < 200000; i++ {
		k := fmt.Sprintf("acct:%d", i)
		req := limiter.Request{Key: k, Limit: hourly}
		match := true
		for n, owner := range owners {
			match = match && calc.Owner(fmt.Sprintf("n%d", n), req) == owner
		}
		if match {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		t.Fatalf("no key owned by %v on the rings of n0..n%d", owners, len(owners)-1)
	}
	return ks
}

// expectKept reads every key of ks through node on and fails the test
// unless each has 40 of 100 remaining.
func expectKept(t *testing.T, c *limitertest.Cluster, on string, ks []string) {
	t.Helper()
	if bad := remainingOrFallback(t, c, on, ks, hourly, 40, false); len(bad) > 0 {
		t.Fatalf("%d of %d keys lost their counter, e.g. %s", len(bad), len(ks), bad[0])
	}
}

// runScenario spends 60 of hourly on 30 keys through n0 of a cluster of
// n0, n1, n2 whose rings are epochs (limitertest.NewEpochCluster), runs
// steps, and checks that the counters were kept at every read.
func runScenario(t *testing.T, steps []step) {
	t.Helper()
	c := limitertest.NewEpochCluster(t, nil, "n0", "n1", "n2")
	ks := keys(30)
	spend(t, c, "n0", ks, hourly, 60)
	for i, s := range steps {
		if s.read != "" {
			if bad := remainingOrFallback(t, c, s.read, ks, hourly, 40, s.fallbackOK); len(bad) > 0 {
				t.Fatalf("step %d (%s): %d of %d keys lost their counter, e.g. %s", i, s.what, len(bad), len(ks), bad[0])
			}
			continue
		}
		if err := s.do(c); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.what, err)
		}
	}
}

var (
	old3  = []string{"n0", "n1", "n2"}
	with3 = []string{"n0", "n1", "n2", "n3"}
)

// One node joins or leaves: counters move with their keys, whether the new
// owner fetches them on demand (reads before the handoff) or receives them
// (handoff first), and in either order of who sees the change first.
func TestHandoffJoinAndLeave(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"join, handoff first", []step{
			add("n3"), everyRing(with3, with3...), handOff(with3...), expect40("n1"), expect40("n3"),
		}},
		{"join, reads before the handoff", []step{
			add("n3"), everyRing(with3, with3...), expect40("n1"), handOff(with3...), expect40("n3"),
		}},
		{"join, the joiner sees it first", []step{
			add("n3"), onRing("n3", with3...), handOff("n3"), everyRing(old3, with3...), expect40("n2"), handOff(old3...), expect40("n0"),
		}},
		{"join, old nodes hand off before the joiner sees it", []step{
			// The joiner, alone on its ring, refuses their states; they
			// keep them and push them again once it sees them.
			add("n3"), everyRing(old3, with3...), handOffOrRefused(old3...), onRing("n3", with3...), expect40("n3"),
			handOff("n3"), handOff(old3...), expect40("n1"),
		}},
		{"leave, stayers see it after the handoff", []step{
			add("n3"), everyRing(with3, with3...), handOff(with3...),
			leave("n3", old3...), everyRing(old3, old3...), handOff(old3...), stop("n3"), expect40("n0"),
		}},
		{"leave, stayers see it before the handoff", []step{
			add("n3"), everyRing(with3, with3...), handOff(with3...),
			everyRing(old3, old3...), expect40("n1"), leave("n3", old3...), handOff(old3...), stop("n3"), expect40("n2"),
		}},
		{"two leave together", []step{
			leave("n2", "n0", "n1"), leave("n1", "n0", "n2"), onRing("n0", "n0"), handOff("n0"), expect40("n0"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runScenario(t, tt.steps) })
	}
}

// A node whose ring lags hands a key to a node whose ring gives it back
// (the receiver adopts it); the receiver then finishes its own handoff. Its
// acknowledgements must not cover the adopted key's partition: when the
// first node's ring catches up and gives it the key again, it fetches the
// key from the adopter instead of counting it afresh. This is two nodes
// leaving together as node tests saw it: n2 saw n3 go before n4, n0 and n1
// saw both go at once.
func TestHandoffAdoptedKeyIsNotAcknowledged(t *testing.T) {
	all := []string{"n0", "n1", "n2", "n3", "n4"}
	r4 := []string{"n0", "n1", "n2", "n4"}
	r3 := []string{"n0", "n1", "n2"}
	// calc only computes owners on each ring.
	calc := limitertest.NewCluster(t, nil, "n0", "n1", "n2", "n3", "n4")
	calc.SetRing("n0", all...)
	calc.SetRing("n1", r4...)
	calc.SetRing("n2", r3...)
	ks := keysOwnedOnRings(t, calc, "n2", "n1", "n2") // by 5, 4 and 3 members

	c := limitertest.NewCluster(t, nil, all...)
	spend(t, c, "n0", ks, hourly, 60)
	steps := []step{
		onRing("n2", r4...), onRing("n1", r3...), onRing("n0", r3...),
		handOff("n2"),       // the keys go to n1, whose ring gives them back: adopted
		handOff("n1", "n0"), // n1 must not acknowledge the adopted keys' partitions
		leave("n3", r3...), leave("n4", r3...), stop("n3"), stop("n4"),
		onRing("n2", r3...), handOff("n2"),
	}
	for i, s := range steps {
		if err := s.do(c); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.what, err)
		}
	}
	expectKept(t, c, "n0", ks)
}

// Two joins, as node tests saw them: n4 sees the five members first and
// acknowledges n3's partitions to it (n3 takes acknowledgements from a
// node it does not know yet); n1, whose ring has n4 but not n3, then
// hands n4 a key whose owner on n4's ring is n3. n4 must pass the key on
// to n3. If n4 kept the key, n3, once it saw n4, would take n4's
// acknowledgement and count the key afresh. With epochs n3 catches up to
// n4's epoch and takes the key; without, n3 refuses it while its ring
// lacks n4, the push fails and n1 keeps its copy, which n3 fetches.
func TestHandoffPassOnToOwnerThatDoesNotKnowTheJoiner(t *testing.T) {
	all := []string{"n0", "n1", "n2", "n3", "n4"}
	no4 := []string{"n0", "n1", "n2", "n3"}
	no3 := []string{"n0", "n1", "n2", "n4"}
	calc := limitertest.NewCluster(t, nil, all...)
	calc.SetRing("n0", old3...)
	calc.SetRing("n1", no3...)
	ks := keysOwnedOnRings(t, calc, "n1", "n4", "n3") // by 3, 4 and 5 members
	t.Run("the owner catches up to the joiner's epoch", func(t *testing.T) {
		c := limitertest.NewEpochCluster(t, noReplicas, old3...) // epoch 1
		spend(t, c, "n0", ks, hourly, 60)
		c.Add("n3") // no epoch applied: its ring is itself alone
		c.Add("n4")
		for i, s := range []step{
			onRing("n1", no3...), onRing("n4", no3...), // epoch 2: n4 joined
			onRing("n4", all...), // epoch 3: n3 joined
			handOff("n4"),        // n4 holds nothing: it acknowledges n3's partitions
			handOff("n1"),        // the keys go to n4, which passes them on to n3
		} {
			if err := s.do(c); err != nil {
				t.Fatalf("step %d (%s): %v", i, s.what, err)
			}
		}
		if got := c.Net.Calls("n4", "n3").Handoff; got < 2 {
			t.Fatalf("n4 made %d handoff calls to n3, want its acknowledgements and the pass-on", got)
		}
		expectKept(t, c, "n3", ks)
		expectKept(t, c, "n0", ks)
	})
	// setUp returns a cluster where n1 is about to hand the keys to n4.
	setUp := func(t *testing.T) *limitertest.Cluster {
		c := limitertest.NewCluster(t, noReplicas, old3...)
		spend(t, c, "n0", ks, hourly, 60)
		c.Add("n3")
		c.Add("n4")
		for i, s := range []step{
			onRing("n3", no4...), onRing("n4", all...),
			handOff("n4"), // n4 holds nothing: it acknowledges n3's partitions
			onRing("n1", no3...),
		} {
			if err := s.do(c); err != nil {
				t.Fatalf("step %d (%s): %v", i, s.what, err)
			}
		}
		return c
	}
	t.Run("the owner never learns of it in time", func(t *testing.T) {
		c := setUp(t)
		if _, err := c.HandOff("n1"); !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Fatalf("n1: HandOff: %v, want an error wrapping ErrPeerUnavailable (n4 could not pass the keys on)", err)
		}
		c.SetRing("n3", all...)
		// n1 refuses n3's fetch while its ring lacks n3: the keys answer
		// from their failure mode, never afresh.
		if bad := remainingOrFallback(t, c, "n3", ks, hourly, 40, true); len(bad) > 0 {
			t.Fatalf("before n1 sees n3: %d of %d keys lost their counter, e.g. %s", len(bad), len(ks), bad[0])
		}
		c.SetRing("n1", all...)
		expectKept(t, c, "n3", ks) // fetched from n1, which kept them
	})
}

// A key handed back while the handoff that carried it away is still in
// flight: n2 (ring of four) hands keys to n1; n1, whose ring then drops n3
// and n4, hands them straight back, and n2 adopts them (its ring still
// gives them to n1) before its own call has returned. n2 must keep what
// came back, not delete the keys when its call returns: both nodes would
// then hold nothing, and n2, owner again once its ring catches up, would
// count them afresh. As node's two-joins test saw it when n3 and n4 left
// together.
func TestHandoffKeyHandedBackWhileInFlight(t *testing.T) {
	all := []string{"n0", "n1", "n2", "n3", "n4"}
	r4 := []string{"n0", "n1", "n2", "n4"}
	r3 := []string{"n0", "n1", "n2"}
	calc := limitertest.NewCluster(t, nil, all...)
	calc.SetRing("n0", all...)
	calc.SetRing("n1", r4...)
	calc.SetRing("n2", r3...)
	ks := keysOwnedOnRings(t, calc, "n2", "n1", "n2") // by 5, 4 and 3 members

	c := limitertest.NewCluster(t, nil, all...)
	spend(t, c, "n0", ks, hourly, 60)
	c.SetRing("n2", r4...)
	var back error
	c.Net.AfterHandoff("n2", "n1", func() {
		c.SetRing("n1", r3...)
		_, back = c.HandOff("n1")
	})
	if _, err := c.HandOff("n2"); err != nil {
		t.Fatalf("n2: HandOff: %v", err)
	}
	if back != nil {
		t.Fatalf("n1: HandOff: %v", back)
	}
	if got := c.Net.Calls("n1", "n2").Handoff; got == 0 {
		t.Fatal("n1 handed nothing back to n2")
	}
	c.SetRing("n2", r3...)
	c.SetRing("n0", r3...)
	expectKept(t, c, "n0", ks)
}

// A joiner pushes a key to its owner, which is behind: n1, whose ring
// has n4 but not n3, hands n4 a key that n3 owns on the rings with n3;
// n4's ring then has all five and it pushes the key to n3, whose ring
// (an earlier epoch) does not have n4 yet, and every other holder has
// acknowledged the key's partition to n3. n3 catches up to n4's epoch
// before it judges n4, so it takes the push: the key is never left on a
// node its owner does not ask. As node's two-joins test saw it.
func TestHandoffToAnOwnerBehindIsTakenOnceItCaughtUp(t *testing.T) {
	all := []string{"n0", "n1", "n2", "n3", "n4"}
	no4 := []string{"n0", "n1", "n2", "n3"}
	no3 := []string{"n0", "n1", "n2", "n4"}
	calc := limitertest.NewCluster(t, nil, all...)
	calc.SetRing("n0", old3...)
	calc.SetRing("n1", no3...)
	calc.SetRing("n2", no4...)
	calc.SetRing("n3", all...)
	ks := keysOwnedOnRings(t, calc, "n1", "n4", "n3", "n3") // by 3, 4 (no n3), 4 (no n4) and 5 members

	c := limitertest.NewEpochCluster(t, noReplicas, old3...)
	spend(t, c, "n0", ks, hourly, 60)
	c.Add("n3")
	c.Add("n4")
	for i, s := range []step{
		onRing("n3", no4...), handOff("n3"), // n3 holds nothing: it acknowledges the others' partitions
		onRing("n0", no4...), onRing("n2", no4...), handOff("n0", "n2"), // they hold none of the keys: acknowledged
		onRing("n4", no3...), onRing("n1", no3...), handOff("n1"), // the keys go to n4
		onRing("n4", all...), handOff("n4"), // n3 catches up and takes them
		onRing("n1", all...), handOff("n1"),
	} {
		if err := s.do(c); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.what, err)
		}
	}
	if got := c.Net.Calls("n4", "n3").Handoff; got == 0 {
		t.Fatal("n4 pushed nothing to n3")
	}
	expectKept(t, c, "n3", ks)
	expectKept(t, c, "n0", ks)
}

// A key read by its new owner while the handoff carrying its state is on
// its way there: the owner's fetch from the sender must find the state,
// though it has left the sender's store, and not count the key afresh.
// As node's two-joins test saw it when n3 fetched a key from n4 a moment
// before n4's retried push of it arrived.
func TestHandoffKeyFetchedWhileInFlight(t *testing.T) {
	c := limitertest.NewCluster(t, noReplicas, "n0")
	calc := limitertest.NewCluster(t, nil, "n0", "n1")
	ks := calc.KeysOwnedBy("n0", "n1", "acct", limiter.Request{Limit: hourly}, 3)
	spend(t, c, "n0", ks, hourly, 60)
	c.Add("n1")
	c.SetRing("n1", "n0", "n1") // the keys' partitions are pending on n1
	c.SetRing("n0", "n0", "n1")
	var bad []string
	c.Net.BeforeHandoff("n0", "n1", func() {
		bad = remainingOrFallback(t, c, "n1", ks, hourly, 40, false)
	})
	if _, err := c.HandOff("n0"); err != nil {
		t.Fatalf("n0: HandOff: %v", err)
	}
	if len(bad) > 0 {
		t.Fatalf("read while the states travel: %d of %d keys lost their counter, e.g. %s", len(bad), len(ks), bad[0])
	}
	if bad := remainingOrFallback(t, c, "n1", ks, hourly, 40, false); len(bad) > 0 {
		t.Fatalf("read after the handoff: %d of %d keys lost their counter, e.g. %s", len(bad), len(ks), bad[0])
	}
}
