package ownership_test

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter/ownership"
)

// join starts a net of a and b, then c joins in epoch 2 (committed, not
// applied), and returns a partition that moves from a to c.
func join(t *testing.T) (*tnet, int) {
	n := newNet(t, "a", "b")
	n.spawn("c")
	n.commit(nil, "a", "b", "c")
	p := n.partition(1, 2, "a", "c")
	n.nodes["a"].store[p] = "a's count"
	return n, p
}

func want(t *testing.T, n *tnet, name string, p int, a ownership.Action) {
	t.Helper()
	if got := n.action(name, p); got != a {
		t.Fatalf("%s: MayDecide(%d) = %d, want %d", name, p, got, a)
	}
}

func TestOldOwnerStopsDecidingAsItAppliesTheNextEpoch(t *testing.T) {
	n, p := join(t)
	want(t, n, "a", p, ownership.Decide)
	n.apply("a")
	if d := n.nodes["a"].m.MayDecide(p, n.now); d.Action != ownership.Forward || d.To != "c" {
		t.Fatalf("a after epoch 2: %+v, want Forward to c", d)
	}
	for _, m := range n.inflight {
		if m.Partition == p && m.Kind == ownership.MsgDone && m.To == "c" && m.For == 2 && m.States == "a's count" {
			return
		}
	}
	t.Fatalf("a sent %+v, want a MsgDone of partition %d for epoch 2 with its states", n.inflight, p)
}

func TestNewOwnerDecidesOnlyAfterDone(t *testing.T) {
	n, p := join(t)
	n.apply("c")
	want(t, n, "c", p, ownership.Wait)
	n.apply("a")
	want(t, n, "c", p, ownership.Wait)
	n.deliver(ownership.MsgDone)
	want(t, n, "c", p, ownership.Decide)
	if got := n.nodes["c"].store[p]; got != "a's count" {
		t.Fatalf("c's states %q, want a's", got)
	}
}

func TestSenderKeepsItsCopyUntilAcknowledged(t *testing.T) {
	n, p := join(t)
	n.apply("c")
	n.apply("a")
	n.drop(0) // the MsgDone is lost
	n.nodes["a"].m.Tick()
	n.drain("a")
	n.deliver(ownership.MsgDone)
	want(t, n, "c", p, ownership.Decide)
	n.drop(ownership.MsgAck) // the acknowledgement is lost: a sends again
	if _, ok := n.nodes["a"].store[p]; !ok {
		t.Fatal("a deleted its copy before the acknowledgement")
	}
	n.nodes["a"].m.Tick()
	n.drain("a")
	n.nodes["c"].store[p] = "c decided since"
	n.deliver(0) // the duplicate is acknowledged again, not merged
	if got := n.nodes["c"].store[p]; got != "c decided since" {
		t.Fatalf("c merged a duplicate MsgDone: %q", got)
	}
	if _, ok := n.nodes["a"].store[p]; ok {
		t.Fatal("a kept its copy after the acknowledgement")
	}
}

// TestChainsForwardOnceSettled: a -> c in epoch 2, c -> b in epoch 3
// (c leaves) before c got a's MsgDone: c passes on what it receives.
func TestChainsForwardOnceSettled(t *testing.T) {
	n, p := join(t)
	n.commit(map[string]ownership.Removal{"c": ownership.Leave}, "a", "b")
	q, _ := n.log[3].Ring.PartitionOwner(p)
	for _, name := range []string{"c", "b", "a"} {
		n.apply(name)
		n.apply(name)
	}
	want(t, n, q.Name, p, ownership.Wait)
	if n.nodes["c"].m.Drained() {
		t.Fatal("c drained before it passed a's states on")
	}
	n.deliver(0)
	want(t, n, q.Name, p, ownership.Decide)
	if got := n.nodes[q.Name].store[p]; got != "a's count" {
		t.Fatalf("%s's states %q, want a's", q.Name, got)
	}
	if !n.nodes["c"].m.Drained() {
		t.Fatalf("c not drained: %v", n.nodes["c"].m.Pending())
	}
}

// TestReversalsComeBack: a -> c in epoch 2, c -> a in epoch 3 (c leaves
// at once): a decides again only once c has passed the states back.
func TestReversalsComeBack(t *testing.T) {
	n, p := join(t)
	n.commit(map[string]ownership.Removal{"c": ownership.Leave}, "a", "b")
	if o, _ := n.log[3].Ring.PartitionOwner(p); o.Name != "a" {
		t.Skipf("partition %d goes to %s, not back to a", p, o.Name)
	}
	n.apply("a")
	n.apply("a")
	want(t, n, "a", p, ownership.Wait)
	n.nodes["a"].store[p] = "stale" // a's own copy is not what it decides
	n.apply("c")
	n.deliver(0)
	want(t, n, "a", p, ownership.Wait) // c has not applied epoch 3
	n.apply("c")
	n.deliver(0)
	want(t, n, "a", p, ownership.Decide)
	if got := n.nodes["a"].store[p]; got != "a's count" {
		t.Fatalf("a's states %q, want what it handed c, handed back", got)
	}
}

// dead starts a, b, c; c is removed as Dead in epoch 2. It returns a
// partition c owned and its new owner.
func dead(t *testing.T, heirIsOwner bool) (*tnet, int, string) {
	n := newNet(t, "a", "b", "c")
	members := []string{"a", "b"}
	if !heirIsOwner {
		// d joins as c is removed: some of c's partitions go to d, which
		// is not their heir.
		n.spawn("d")
		members = append(members, "d")
	}
	n.commit(map[string]ownership.Removal{"c": ownership.Dead}, members...)
	for p := range testRingConfig.PartitionCount {
		o, _ := n.log[1].Ring.PartitionOwner(p)
		next, _ := n.log[2].Ring.PartitionOwner(p)
		heir, _ := n.log[1].Heirs.Heir(uint64(p), 0)
		if o.Name == "c" && (heir.Name == next.Name) == heirIsOwner {
			n.nodes[heir.Name].replica[p] = "heir's copy"
			return n, p, next.Name
		}
	}
	t.Skip("no such partition")
	return nil, 0, ""
}

func TestDeadOwnerIsTakenFromTheHeirAfterTheWait(t *testing.T) {
	n, p, owner := dead(t, true)
	n.apply(owner)
	want(t, n, owner, p, ownership.Wait)
	n.now = n.now.Add(testWait - time.Nanosecond)
	want(t, n, owner, p, ownership.Wait)
	n.now = n.now.Add(time.Nanosecond)
	want(t, n, owner, p, ownership.Decide)
	if got := n.nodes[owner].store[p]; got != "heir's copy" {
		t.Fatalf("%s's states %q, want the heir's copy", owner, got)
	}
}

func TestHeirCopyIsFetchedByANewOwnerThatIsNotTheHeir(t *testing.T) {
	n, p, owner := dead(t, false)
	n.apply(owner)
	n.now = n.now.Add(testWait)
	want(t, n, owner, p, ownership.Wait)
	for _, name := range []string{"a", "b", "d"} {
		if name != owner {
			n.apply(name)
		}
	}
	n.drop(ownership.MsgFetch)
	n.nodes[owner].m.Tick() // the fetch is sent again
	n.drain(owner)
	n.deliver(0)
	want(t, n, owner, p, ownership.Decide)
	if got := n.nodes[owner].store[p]; got != "heir's copy" {
		t.Fatalf("%s's states %q, want the heir's copy", owner, got)
	}
}

// TestAwaitedHolderRemovedAsDeadIsReplacedByItsHeir: c awaits a's
// MsgDone (epoch 2); a is removed as Dead in epoch 3 before sending it.
func TestAwaitedHolderRemovedAsDeadIsReplacedByItsHeir(t *testing.T) {
	n, p := join(t)
	heir, _ := n.log[1].Heirs.Heir(uint64(p), 0)
	n.nodes[heir.Name].replica[p] = "heir's copy"
	n.commit(map[string]ownership.Removal{"a": ownership.Dead}, "b", "c")
	n.apply("c")
	n.apply("c")
	n.apply("b")
	n.apply("b")
	n.deliver(0)
	n.now = n.now.Add(testWait)
	if o, _ := n.log[3].Ring.PartitionOwner(p); o.Name != "c" {
		t.Skipf("partition %d moved on to %s", p, o.Name)
	}
	want(t, n, "c", p, ownership.Decide)
	if got := n.nodes["c"].store[p]; got != "heir's copy" {
		t.Fatalf("c's states %q, want the heir's copy", got)
	}
}

func TestDoneFromADeadSenderIsRedirected(t *testing.T) {
	n, p := join(t)
	n.commit(map[string]ownership.Removal{"a": ownership.Dead}, "b", "c")
	n.apply("a") // a sends its MsgDone for epoch 2, then is removed as Dead
	n.apply("c")
	n.apply("c")
	n.deliver(ownership.MsgDone)
	if len(n.inflight) == 0 || n.inflight[len(n.inflight)-1].Kind != ownership.MsgRedirect {
		t.Fatalf("c answered %+v, want a MsgRedirect", n.inflight)
	}
	n.deliver(ownership.MsgRedirect)
	if n.nodes["a"].catchUp != 3 {
		t.Fatalf("a's CatchUp = %d, want 3", n.nodes["a"].catchUp)
	}
	_ = p
}

func TestReceiverBehindQueuesUpToItsLimit(t *testing.T) {
	n, p := join(t)
	n.apply("a") // a's MsgDone for epoch 2 reaches c at epoch 1
	n.deliver(0)
	if got := n.nodes["c"].catchUp; got != 2 {
		t.Fatalf("c's CatchUp = %d, want 2", got)
	}
	n.apply("c")
	want(t, n, "c", p, ownership.Decide)
	// QueueLimit is 4: of five fetches from epoch 3, c answers four once
	// it applies epoch 3.
	c := n.nodes["c"].m
	for i := range 5 {
		if err := c.Step(ownership.Message{Kind: ownership.MsgFetch, From: "b", To: "c", Epoch: 3, Partition: i, For: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.Ready(); len(r.Transfers) != 0 || r.CatchUp != 3 {
		t.Fatalf("c at epoch 2 answered %+v, want nothing and CatchUp 3", r)
	}
	n.commit(nil, "a", "b", "c")
	if err := c.ApplyEpoch(n.log[3], n.now); err != nil {
		t.Fatal(err)
	}
	if r := c.Ready(); len(r.Transfers) != 4 {
		t.Fatalf("c answered %d fetches, want 4 (its QueueLimit)", len(r.Transfers))
	}
}

func TestLeaseCountsOnlyOnceItsEpochIsApplied(t *testing.T) {
	n, p := join(t)
	a := n.nodes["a"].m
	a.SetLease(n.now.Add(time.Second), 2)
	want(t, n, "a", p, ownership.Wait) // a is behind: epoch 1
	a.SetLease(n.now.Add(time.Second), 1)
	want(t, n, "a", p, ownership.Decide)
	n.now = n.now.Add(time.Second)
	want(t, n, "a", p, ownership.Fallback) // lapsed: the minority side
}

// TestLeaverExitsWhenDrainedAndGoneEndsHandoffsToIt: c joins and leaves
// at once; c's acknowledgement of a's MsgDone is lost, then c exits.
func TestLeaverExitsWhenDrainedAndGoneEndsHandoffsToIt(t *testing.T) {
	n, p := join(t)
	n.commit(map[string]ownership.Removal{"c": ownership.Leave}, "a", "b")
	for _, name := range []string{"c", "b", "a"} {
		n.apply(name)
		n.apply(name)
	}
	if n.nodes["c"].m.Drained() {
		t.Fatal("c drained before it had a's states")
	}
	n.deliver(ownership.MsgDone)
	n.dropIf(func(m ownership.Message) bool { return m.Kind == ownership.MsgAck && m.To == "a" && m.For == 2 })
	n.deliver(0)
	if !n.nodes["c"].m.Drained() {
		t.Fatalf("c not drained: %v", n.nodes["c"].m.Pending())
	}
	if len(n.nodes["a"].m.Pending()) == 0 {
		t.Fatal("a's handoff to c is done without its acknowledgement")
	}
	n.nodes["a"].m.Gone("c")
	if got := n.nodes["a"].m.Pending(); len(got) != 0 {
		t.Fatalf("a's handoffs after c is gone: %v", got)
	}
	_ = p
}

func TestNodeRemovedAsDeadStops(t *testing.T) {
	n := newNet(t, "a", "b")
	n.commit(map[string]ownership.Removal{"a": ownership.Dead}, "b")
	n.apply("a")
	for p := range testRingConfig.PartitionCount {
		want(t, n, "a", p, ownership.Fallback)
	}
	if len(n.inflight) != 0 || n.nodes["a"].m.Removed() != ownership.Dead {
		t.Fatalf("a removed as Dead sent %+v", n.inflight)
	}
}
