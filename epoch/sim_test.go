package epoch

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// simNet is an in-memory network of machines on a fake clock: each step
// advances time by one tick, gives every running node its gossip view,
// ticks it, and delivers the messages due. Links can be cut one way or
// both; messages can be dropped and delayed (less than the election
// timeout, as the Transport contract says). The gossip views are exact:
// a node cut off from another, either way, sees it dead.
type simNet struct {
	t        testing.TB
	rng      *rand.Rand
	now      time.Time
	cfg      Config // template: Name, GRPCAddr and BootstrapExpect are set per node
	nodes    map[string]*simNode
	names    []string
	flight   []flying
	cut      map[[2]string]bool // from, to
	drop     float64
	maxDelay time.Duration
	log      []string // the schedule, printed on failure
	ticks    int

	canon   map[uint64][]Epoch   // group -> the epochs applied, in order
	lastNum map[uint64]uint64    // incarnation (Raft ID) -> last epoch number it applied
	leaders map[[2]uint64]uint64 // group, term -> leader
	deadBy  map[uint64]time.Time // Raft ID removed as dead -> its lease must end by then
	applied map[string][]Epoch   // node name -> every epoch it applied, all incarnations
}

type simNode struct {
	name    string
	m       *machine
	running bool
	left    bool
}

type flying struct {
	at       time.Time
	from, to string
	msg      Message
}

func newSimNet(t testing.TB, seed uint64) *simNet {
	cfg := FastConfig("", "")
	cfg.MaxVoters = DefaultMaxVoters
	return &simNet{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), now: time.Unix(1_700_000_000, 0), cfg: cfg.withDefaults(),
		nodes: map[string]*simNode{}, cut: map[[2]string]bool{},
		canon: map[uint64][]Epoch{}, lastNum: map[uint64]uint64{}, leaders: map[[2]uint64]uint64{},
		deadBy: map[uint64]time.Time{}, applied: map[string][]Epoch{},
	}
}

func (s *simNet) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%6dms ", s.now.Sub(time.Unix(1_700_000_000, 0)).Milliseconds())+fmt.Sprintf(format, args...))
}

func (s *simNet) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("%s\nschedule:\n%s", fmt.Sprintf(format, args...), strings.Join(s.log, "\n"))
}

// start starts (or restarts, with no state) the node name.
func (s *simNet) start(name string, expect int) {
	s.t.Helper()
	cfg := s.cfg
	cfg.Name, cfg.GRPCAddr, cfg.BootstrapExpect = name, name+":7946", expect
	cfg.NewID = func() uint64 { return s.rng.Uint64() | 1 }
	m, err := newMachine(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, ok := s.nodes[name]; !ok {
		s.names = append(s.names, name)
		slices.Sort(s.names)
	}
	s.nodes[name] = &simNode{name: name, m: m, running: true}
	s.logf("start %s (expect %d) as %x", name, expect, m.id)
	s.collect(s.nodes[name])
}

func (s *simNet) kill(name string) {
	s.nodes[name].running = false
	s.logf("kill %s", name)
}

func (s *simNet) leave(name string) {
	s.nodes[name].left = true
	s.logf("leave %s", name)
}

// partition cuts every link between the two sides (both ways).
func (s *simNet) partition(a, b []string) {
	for _, x := range a {
		for _, y := range b {
			s.cut[[2]string{x, y}], s.cut[[2]string{y, x}] = true, true
		}
	}
	s.logf("partition %v | %v", a, b)
}

func (s *simNet) heal() {
	clear(s.cut)
	s.logf("heal")
}

func (s *simNet) linked(a, b string) bool { return !s.cut[[2]string{a, b}] && !s.cut[[2]string{b, a}] }

// view is gossip's view from node name.
func (s *simNet) view(name string) []Peer {
	var v []Peer
	for _, other := range s.names {
		o := s.nodes[other]
		p := Peer{Name: other, GRPCAddr: other + ":7946", RaftID: o.m.id, Group: o.m.group, Epoch: o.m.number}
		switch {
		case o.left:
			p.Status = StatusLeft
		case !o.running || !s.linked(name, other):
			p.Status = StatusDead
		}
		v = append(v, p)
	}
	return v
}

// step advances one tick.
func (s *simNet) step() {
	s.t.Helper()
	s.now = s.now.Add(s.cfg.TickInterval)
	s.ticks++
	for _, name := range s.names {
		if n := s.nodes[name]; n.running {
			if s.ticks%3 == 1 { // gossip is slower than Raft
				n.m.setView(s.now, s.view(name))
				s.collect(n)
			}
			n.m.tick(s.now)
			s.collect(n)
		}
	}
	due := s.flight[:0:0]
	var later []flying
	for _, f := range s.flight {
		if f.at.After(s.now) {
			later = append(later, f)
		} else {
			due = append(due, f)
		}
	}
	s.flight = later
	for _, f := range due {
		if n := s.nodes[f.to]; n.running && n.m.id == f.msg.Raft.GetTo() && s.linked(f.from, f.to) {
			n.m.step(s.now, f.msg.Group, f.msg.Raft)
			s.collect(n)
		}
	}
	s.check()
}

// collect takes a node's output: queues its messages, checks its epochs.
func (s *simNet) collect(n *simNode) {
	s.t.Helper()
	msgs, eps := n.m.takeOutput()
	for _, msg := range msgs {
		to := ""
		for _, name := range s.names {
			if s.nodes[name].m.id == msg.Raft.GetTo() {
				to = name
			}
		}
		if to == "" || s.cut[[2]string{n.name, to}] || s.drop > 0 && s.rng.Float64() < s.drop {
			continue
		}
		at := s.now
		if s.maxDelay > 0 {
			at = at.Add(time.Duration(s.rng.Int64N(int64(s.maxDelay))))
		}
		s.flight = append(s.flight, flying{at: at, from: n.name, to: to, msg: msg})
	}
	for _, a := range eps {
		e := a.Epoch
		s.applied[n.name] = append(s.applied[n.name], e)
		if want := s.lastNum[a.by] + 1; e.Number != want {
			s.fatalf("%s (%x) applied epoch %d after %d", n.name, a.by, e.Number, want-1)
		}
		s.lastNum[a.by] = e.Number
		c := s.canon[e.Group]
		switch {
		case e.Number <= uint64(len(c)):
			if !reflect.DeepEqual(c[e.Number-1], e) {
				s.fatalf("%s applied epoch %d of group %x as %+v; another node applied %+v", n.name, e.Number, e.Group, e, c[e.Number-1])
			}
		case e.Number == uint64(len(c))+1:
			s.canon[e.Group] = append(c, e)
			s.logf("epoch %d of %x: %v %s, members %d, voters %v", e.Number, e.Group, e.Change.Kind, e.Change.Name, len(e.Members), e.Voters)
			if e.Change.Kind == Join {
				delete(s.deadBy, s.nodes[e.Change.Name].m.id) // a removed node added back under its Raft ID
			}
			if e.Change.Kind == Dead {
				// The removed incarnation: the one the previous epoch had.
				if id := s.raftIDIn(e.Group, e.Change.Name); id != 0 {
					s.deadBy[id] = s.now.Add(s.cfg.DeadWait())
				}
			}
		default:
			s.fatalf("%s applied epoch %d of group %x, beyond the %d applied anywhere", n.name, e.Number, e.Group, len(c))
		}
	}
}

// raftIDIn finds the Raft ID a running node had for name in group g: the
// incarnation that may still hold a lease.
func (s *simNet) raftIDIn(g uint64, name string) uint64 {
	n := s.nodes[name]
	if n.m.group == g {
		if mem, ok := n.m.members[name]; ok {
			return mem.RaftID
		}
	}
	return 0
}

// check checks the invariants that hold at every instant.
func (s *simNet) check() {
	s.t.Helper()
	for _, name := range s.names {
		n := s.nodes[name]
		if !n.running {
			continue
		}
		st := n.m.rn.BasicStatus()
		if st.RaftState.String() == "StateLeader" && n.m.group != 0 {
			k := [2]uint64{n.m.group, st.HardState.GetTerm()}
			if l, ok := s.leaders[k]; ok && l != n.m.id {
				s.fatalf("two leaders in term %d of group %x: %x and %x (%s)", k[1], k[0], l, n.m.id, name)
			}
			s.leaders[k] = n.m.id
		}
		if by, ok := s.deadBy[n.m.id]; ok && n.m.leaseUntil().After(by) {
			s.fatalf("%s (%x) holds a lease until %v, after its Dead epoch's bound %v", name, n.m.id, n.m.leaseUntil(), by)
		}
	}
}

// run steps for d of fake time.
func (s *simNet) run(d time.Duration) {
	s.t.Helper()
	for end := s.now.Add(d); s.now.Before(end); {
		s.step()
	}
}

// runUntil steps until cond holds, failing after d of fake time.
func (s *simNet) runUntil(d time.Duration, what string, cond func() bool) {
	s.t.Helper()
	for end := s.now.Add(d); !cond(); s.step() {
		if s.now.After(end) {
			s.fatalf("after %v: not %s\n%s", d, what, s.describe())
		}
	}
}

func (s *simNet) describe() string {
	var b strings.Builder
	for _, name := range s.names {
		n := s.nodes[name]
		st := n.m.status()
		li, _ := n.m.store.LastIndex()
		fmt.Fprintf(&b, "  %s running=%v left=%v id=%x group=%x leader=%v term=%d epoch=%d members=%d voters=%v learners=%v raft=%v applied=%d last=%d\n",
			name, n.running, n.left, n.m.id, n.m.group, st.Leader, st.Term, n.m.number, len(n.m.members), st.Voters, st.Learners,
			n.m.cs, n.m.appliedAt, li)
	}
	return b.String()
}

// settled reports whether the running nodes that have not left form one
// group that agrees on its last epoch, whose members are exactly them,
// with the voters votersFor says.
func (s *simNet) settled() bool {
	var want []string
	for _, name := range s.names {
		if n := s.nodes[name]; n.running && !n.left {
			want = append(want, name)
		}
	}
	if len(want) == 0 {
		return true
	}
	first := s.nodes[want[0]].m
	leaders := 0
	for _, name := range want {
		m := s.nodes[name].m
		if m.group == 0 || m.group != first.group || m.number != first.number {
			return false
		}
		if m.isLeader() {
			leaders++
		}
	}
	var got []string
	for _, mem := range first.last.Members {
		got = append(got, mem.Name)
	}
	st := first.status()
	return leaders == 1 && slices.Equal(got, want) && len(st.Voters) == votersFor(len(want), s.cfg.MaxVoters) &&
		len(st.Voters)+len(st.Learners) == len(want)
}
