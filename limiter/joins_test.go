package limiter_test

import (
	"slices"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

var (
	with5  = []string{"n0", "n1", "n2", "n3", "n4"}
	with4b = []string{"n0", "n1", "n2", "n4"} // n4 has joined, n3 not yet seen
)

// joinOrders are the orders in which three nodes and two newcomers, n3
// then n4 right after it, can see the two joins and hand off. Every one
// ends with all five on the five-node ring, handed off.
var joinOrders = []struct {
	name  string
	steps []step
}{
	{"n4 joins before the handoffs to n3", []step{
		add("n3"), add("n4"), everyRing(old3, with3...), onRing("n3", with3...),
		everyRing(old3, with5...), onRing("n3", with5...), onRing("n4", with5...),
		expect40("n1"), handOff(with5...), expect40("n1"),
	}},
	{"n3 never sees the four-node ring", []step{
		add("n3"), add("n4"), everyRing(old3, with3...), onRing("n3", with5...), onRing("n4", with5...),
		everyRing(old3, with5...), expect40("n1"), handOff(with5...), expect40("n1"),
	}},
	{"old nodes hand off on the four-node ring after n3 moved on", []step{
		add("n3"), add("n4"), everyRing(old3, with3...), onRing("n3", with3...), onRing("n3", with5...),
		onRing("n4", with5...), handOff(old3...), expect40("n1"),
		everyRing(old3, with5...), handOff(with5...), expect40("n1"),
	}},
	{"n4 first sees a ring without n3", []step{
		add("n3"), add("n4"), everyRing(old3, with4b...), onRing("n4", with4b...), onRing("n3", with5...),
		onRing("n4", with5...), everyRing(old3, with5...), expect40("n1"), handOff(with5...), expect40("n1"),
	}},
	{"handoffs between the joins", []step{
		add("n3"), everyRing(with3, with3...), handOff(old3...), handOff("n3"),
		add("n4"), everyRing(with5, with5...), expect40("n1"), handOff(with5...), expect40("n1"),
	}},
	{"old nodes go straight to five", []step{
		add("n3"), add("n4"), onRing("n3", with3...), everyRing(old3, with5...), onRing("n3", with5...),
		onRing("n4", with5...), expect40("n1"), handOff(with5...), expect40("n1"),
	}},
	{"reads on the newcomers before any handoff", []step{
		add("n3"), add("n4"), everyRing(old3, with3...), onRing("n3", with3...),
		everyRing(old3, with5...), onRing("n3", with5...), onRing("n4", with5...),
		expect40("n4"), expect40("n3"), handOff(with5...), expect40("n0"),
	}},
}

// leaveOrders are the ways the two newcomers can leave together, from the
// five-node ring; they end with the three old nodes alone, handed off.
var leaveOrders = []struct {
	name  string
	steps []step
}{
	{"both leave, each still seeing the other", []step{
		leave("n3", with4b...), leave("n4", with3...), everyRing(old3, old3...), handOff(old3...),
		stop("n3"), stop("n4"), expect40("n1"),
	}},
	{"stayers see the first leave before the second", []step{
		leave("n3", with4b...), everyRing(old3, with4b...), expect40("n1"), leave("n4", old3...),
		everyRing(old3, old3...), handOff(old3...), stop("n3"), stop("n4"), expect40("n1"),
	}},
	{"stayers see both leaves before the leavers hand off", []step{
		everyRing(old3, old3...), expect40("n1"), leave("n3", old3...), leave("n4", old3...),
		handOff(old3...), stop("n3"), stop("n4"), expect40("n2"),
	}},
}

// Two nodes join back to back, then leave together: whatever order the
// nodes see the changes and hand off in, the counters of 30 keys (60 of
// 100 spent) read 40 at every step. This is the limiter-level form of
// node's TestClusterTwoJoinThenLeave.
func TestHandoffTwoJoinsThenLeave(t *testing.T) {
	for _, j := range joinOrders {
		t.Run("join/"+j.name, func(t *testing.T) {
			runScenario(t, slices.Concat(j.steps, leaveOrders[0].steps))
		})
	}
	for _, l := range leaveOrders[1:] {
		t.Run("leave/"+l.name, func(t *testing.T) {
			runScenario(t, slices.Concat(joinOrders[0].steps, l.steps))
		})
	}
}

var (
	with4a = []string{"n0", "n1", "n2", "n4"} // the ring once n3 has left the five
	with6  = []string{"n0", "n1", "n2", "n3", "n4", "n5"}
)

// Other orders of joins and leaves, each seen and handed off in a
// different order by different nodes: the counters of 30 keys (60 of 100
// spent) read 40 at every step.
func TestHandoffAnyOrder(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{"join A, join B, leave A", []step{
			add("n3"), onRing("n3", with3...), everyRing(old3, with3...), add("n4"), onRing("n4", with5...),
			expect40OrFallback("n4"), everyRing(with3, with5...), handOff("n4"), expect40("n1"), handOff(with3...),
			leave("n3", with4a...), expect40("n2"), everyRing(with4a, with4a...), handOff(with4a...), stop("n3"),
			expect40("n0"),
		}},
		{"join A, join B, leave A before the handoffs of the joins", []step{
			add("n3"), add("n4"), everyRing(old3, with3...), onRing("n3", with3...), onRing("n4", with5...),
			onRing("n3", with5...), everyRing(old3, with5...), leave("n3", with4a...), expect40("n4"),
			everyRing(with4a, with4a...), stop("n3"), expect40("n1"), handOff(with4a...), expect40("n2"),
		}},
		{"join, leave, join again", []step{
			add("n3"), everyRing(with3, with3...), handOff(with3...), expect40("n3"),
			leave("n3", old3...), everyRing(old3, old3...), handOff(old3...), stop("n3"), expect40("n1"),
			add("n3"), onRing("n3", with3...), expect40("n3"), everyRing(old3, with3...), expect40("n1"),
			handOff(with3...), expect40("n0"),
		}},
		{"join, leave, join again before the others see the leave", []step{
			add("n3"), everyRing(with3, with3...), handOff(with3...),
			leave("n3", old3...), stop("n3"), add("n3"), onRing("n3", with3...), expect40("n3"),
			everyRing(old3, with3...), handOff(with3...), expect40("n1"),
		}},
		{"three joins, each seeing those before it", []step{
			add("n3"), add("n4"), add("n5"), everyRing(old3, with3...), onRing("n3", with3...),
			onRing("n4", with5...), everyRing(old3, with5...), onRing("n5", with6...), expect40OrFallback("n5"),
			onRing("n3", with6...), handOff("n3"), everyRing(old3, with6...), expect40("n1"),
			onRing("n4", with6...), handOff(with6...), expect40("n2"),
		}},
		{"three joins, the last one seen first", []step{
			add("n3"), add("n4"), add("n5"), onRing("n3", with3...), onRing("n4", with5...),
			onRing("n5", with6...), handOff("n5"), expect40OrFallback("n5"), everyRing(old3, with6...), expect40("n0"),
			handOff(old3...), onRing("n4", with6...), expect40OrFallback("n4"), onRing("n3", with6...),
			handOff(with6...), expect40("n3"),
		}},
		{"old nodes hand off on a ring the newcomers have moved on from", []step{
			add("n3"), add("n4"), everyRing(old3, with4b...), onRing("n4", with5...), handOff("n4"),
			onRing("n3", with5...), handOff("n3"), handOff(old3...), everyRing(old3, with5...), handOff(old3...),
			expect40("n1"), expect40("n3"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runScenario(t, tt.steps) })
	}
}

// A joiner that has not applied the epoch that adds it yet (its ring is
// itself alone) catches up to the epoch of the first caller that has,
// before it judges whether that caller is a member: it takes its check
// (fetching the key's count from the previous owner) rather than refuse
// it (a refused check was answered by its failure mode, which
// counted beside the state the joiner holds). 60 used of 100 admits 40.
func TestJoinerCatchesUpBeforeJudgingItsCallers(t *testing.T) {
	key := limitertest.NewCluster(t, nil, "a", "b", "c").KeysOwnedBy("a", "c", "j", limiter.Request{Limit: hourly}, 1)[0]
	c := limitertest.NewEpochCluster(t, nil, "a", "b")
	spend(t, c, "a", []string{key}, hourly, 60)
	c.Add("c") // started: its ring is itself alone, no epoch applied
	c.SetRing("a", "a", "b", "c")
	c.SetRing("b", "a", "b", "c")
	if r := c.Check("a", limiter.Request{Key: key, Limit: hourly, Cost: 1})[0]; r.Source != limiter.SourceOwner || r.Owner != "c" || !r.Allowed || r.Remaining != 39 {
		t.Errorf("check through a before any handoff: %+v, want allowed by owner c with 39 remaining", r)
	}
	for _, n := range []string{"a", "b"} {
		if _, err := c.HandOff(n); err != nil {
			t.Fatalf("%s: HandOff: %v", n, err)
		}
	}
	if got := admitted(c, "b", key, 50); got != 39 {
		t.Errorf("admitted %d more, want 39", got)
	}
}
