package ownership_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter/ownership"
	"github.com/sluice-rl/sluice/ring"
)

const testWait = 100 * time.Millisecond

var testRingConfig = ring.Config{PartitionCount: 64, ReplicationFactor: 16, Load: 1.25}

// tnet drives a few machines by hand: epochs are applied and messages
// delivered only when a test says so.
type tnet struct {
	t        *testing.T
	now      time.Time
	log      []ownership.Epoch
	nodes    map[string]*tnode
	inflight []ownership.Message
}

// tnode is a node's machine and its store: one string per partition.
type tnode struct {
	m       *ownership.Node
	applied int
	store   map[int]string
	replica map[int]string
	catchUp uint64
}

func testRing(t *testing.T, members ...string) *ring.Ring {
	t.Helper()
	ms := make([]ring.Member, len(members))
	for i, m := range members {
		ms[i] = ring.Member{Name: m}
	}
	r, err := ring.New(testRingConfig, ms)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testEpoch(t *testing.T, number uint64, removed map[string]ownership.Removal, members ...string) ownership.Epoch {
	t.Helper()
	r := testRing(t, members...)
	h, err := r.Heirs(2)
	if err != nil {
		t.Fatal(err)
	}
	return ownership.Epoch{Number: number, Ring: r, Heirs: h, Removed: removed}
}

// newNet starts names as the members of epoch 1, each with a lease.
func newNet(t *testing.T, names ...string) *tnet {
	t.Helper()
	n := &tnet{t: t, now: time.Unix(1_700_000_000, 0), nodes: map[string]*tnode{}}
	n.log = []ownership.Epoch{testEpoch(t, 0, nil)}
	for _, name := range names {
		n.spawn(name)
	}
	n.commit(nil, names...)
	for _, name := range names {
		n.apply(name)
	}
	return n
}

func (n *tnet) spawn(name string) *tnode {
	n.t.Helper()
	m, err := ownership.New(ownership.Config{Self: name, DeadOwnerWait: testWait, QueueLimit: 4}, n.log[len(n.log)-1])
	if err != nil {
		n.t.Fatal(err)
	}
	m.SetLease(n.now.Add(time.Hour), 0)
	tn := &tnode{m: m, applied: len(n.log) - 1, store: map[int]string{}, replica: map[int]string{}}
	n.nodes[name] = tn
	return tn
}

// commit appends the next epoch to the log.
func (n *tnet) commit(removed map[string]ownership.Removal, members ...string) {
	n.t.Helper()
	n.log = append(n.log, testEpoch(n.t, uint64(len(n.log)), removed, members...))
}

// apply applies name's next epoch of the log, and does what it asks.
func (n *tnet) apply(name string) {
	n.t.Helper()
	tn := n.nodes[name]
	tn.applied++
	if err := tn.m.ApplyEpoch(n.log[tn.applied], n.now); err != nil {
		n.t.Fatal(err)
	}
	n.drain(name)
}

func (n *tnet) drain(name string) {
	tn := n.nodes[name]
	r := tn.m.Ready()
	for _, mg := range r.Merges {
		switch {
		case mg.FromReplica:
			tn.store[mg.Partition] = tn.replica[mg.Partition]
		case mg.States == nil:
			tn.store[mg.Partition] = ""
		default:
			tn.store[mg.Partition] = mg.States.(string)
		}
	}
	for _, tr := range r.Transfers {
		msg := tr.Msg
		msg.States = tn.store[msg.Partition]
		if tr.FromReplica {
			msg.States = tn.replica[msg.Partition]
		}
		n.inflight = append(n.inflight, msg)
	}
	n.inflight = append(n.inflight, r.Messages...)
	for _, p := range r.Releases {
		delete(tn.store, p)
	}
	tn.catchUp = max(tn.catchUp, r.CatchUp)
}

// deliver steps the in-flight messages of kind (0: any), in order, and
// those they cause, until none is left; it returns how many it delivered.
func (n *tnet) deliver(kind ownership.Kind) int {
	n.t.Helper()
	count := 0
	for {
		i := slices.IndexFunc(n.inflight, func(m ownership.Message) bool { return kind == 0 || m.Kind == kind })
		if i < 0 {
			return count
		}
		m := n.inflight[i]
		n.inflight = slices.Delete(n.inflight, i, i+1)
		count++
		if tn, ok := n.nodes[m.To]; ok {
			if err := tn.m.Step(m); err != nil {
				n.t.Fatal(err)
			}
			n.drain(m.To)
		}
	}
}

// drop loses the in-flight messages of kind (0: any).
func (n *tnet) drop(kind ownership.Kind) {
	n.dropIf(func(m ownership.Message) bool { return kind == 0 || m.Kind == kind })
}

func (n *tnet) dropIf(lost func(ownership.Message) bool) {
	n.inflight = slices.DeleteFunc(n.inflight, lost)
}

func (n *tnet) action(name string, p int) ownership.Action {
	return n.nodes[name].m.MayDecide(p, n.now).Action
}

// partition returns a partition whose owner is from in epoch a and to in
// epoch b of the log.
func (n *tnet) partition(a, b int, from, to string) int {
	n.t.Helper()
	for p := range testRingConfig.PartitionCount {
		x, _ := n.log[a].Ring.PartitionOwner(p)
		y, _ := n.log[b].Ring.PartitionOwner(p)
		if x.Name == from && y.Name == to {
			return p
		}
	}
	n.t.Fatalf("no partition moves from %s in epoch %d to %s in epoch %d", from, a, to, b)
	return 0
}
