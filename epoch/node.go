package epoch

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/sluice-rl/sluice/ring"
)

// Message is one Raft message between nodes.
type Message struct {
	// To is the receiving node: its name and the address it serves peers
	// on. Set on Send; Step ignores it.
	To ring.Member
	// Group is the sender's group, 0 while it is in none. A node in a group
	// drops messages of another: no node's log mixes two groups.
	Group uint64
	// Raft is the message. The Transport owns it from Send on.
	Raft *raftpb.Message
}

// Transport carries Raft messages between nodes.
//
// Send is called by one goroutine at a time (the one driving the Node) and
// must not block: it queues msgs, in order per receiver, and returns. It may
// drop any message (Raft retries), and must drop one it could not deliver
// within the election timeout of its Send: the lease bound (package doc)
// counts on no message arriving later than that. On the receiving side it
// hands each message to that node's Step, from any goroutine.
type Transport interface {
	Send(msgs []Message)
}

// Status is a node's view of its Raft group.
type Status struct {
	// RaftID is this node's Raft ID for this process start (or since its
	// last reset).
	RaftID uint64
	// Group is its group's ID, 0 while it is in none.
	Group uint64
	// Leader is whether it leads the group.
	Leader bool
	// Lead is the name of the member it knows as the group's leader
	// (itself when Leader), empty while it knows none.
	Lead string
	// Term is its Raft term.
	Term uint64
	// Voters and Learners are the members in each Raft role, by name.
	Voters, Learners []string
	// Epoch is the last epoch it applied.
	Epoch Epoch
}

// Node is one member of the Raft group that orders the ring's epochs. Run
// drives it; Step and SetView feed it from any goroutine; the read methods
// may be called from any goroutine, OnEpoch included.
type Node struct {
	cfg   Config
	inbox chan Message
	views chan []Peer
	ran   atomic.Bool

	mu      sync.Mutex // guards the fields below, the machine's published state
	m       *machine
	lease   time.Time
	status  Status
	advert  Advert
	peersBy map[uint64]ring.Member
}

// New returns a Node for cfg. With BootstrapExpect 1 the node is at once
// the founder of a group of one; otherwise it waits for its view (SetView).
// Every *ConfigError is returned, joined.
func New(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newMachine(cfg)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, m: m, inbox: make(chan Message, cfg.Inbox), views: make(chan []Peer, 1)}
	n.publish()
	return n, nil
}

// Step hands the node a message from a peer (msg.To is ignored). It never
// blocks: with the inbox full the message is dropped, as a network would.
func (n *Node) Step(msg Message) {
	select {
	case n.inbox <- msg:
	default:
	}
}

// SetView gives the node gossip's current view of the cluster, this node
// included or not. Only the latest view counts: a newer one replaces one
// Run has not yet taken.
func (n *Node) SetView(view []Peer) {
	view = slices.Clone(view)
	for {
		select {
		case n.views <- view:
			return
		default:
		}
		select {
		case <-n.views:
		default:
		}
	}
}

// Run drives the node until ctx is done: it ticks every TickInterval,
// steps inbound messages, takes views, sends through Config.Transport and
// calls Config.OnEpoch. It returns nil when ctx is done, ErrStopped if
// called twice.
func (n *Node) Run(ctx context.Context) error {
	if n.ran.Swap(true) {
		return ErrStopped
	}
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			n.m.tick(n.cfg.Clock())
		case msg := <-n.inbox:
			n.m.step(n.cfg.Clock(), msg.Group, msg.Raft)
		case v := <-n.views:
			n.m.setView(n.cfg.Clock(), v)
		}
		n.flush()
	}
}

// flush sends the machine's messages, delivers its epochs and publishes
// its state; only Run's goroutine calls it.
func (n *Node) flush() {
	msgs, eps := n.m.takeOutput()
	n.publish()
	if len(msgs) > 0 && n.cfg.Transport != nil {
		out := make([]Message, 0, len(msgs))
		n.mu.Lock()
		for _, msg := range msgs {
			if to, ok := n.peersBy[msg.Raft.GetTo()]; ok {
				msg.To = to
				out = append(out, msg)
			}
		}
		n.mu.Unlock()
		n.cfg.Transport.Send(out)
	}
	if n.cfg.OnEpoch != nil {
		for _, e := range eps {
			n.cfg.OnEpoch(e.Epoch)
		}
	}
}

func (n *Node) publish() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lease = n.m.leaseUntil()
	n.status = n.m.status()
	n.advert = Advert{RaftID: n.m.id, Group: n.m.group, Epoch: n.m.number}
	n.peersBy = n.m.addressBook()
}

// LeaseUntil returns the time until which this node may act as an owner
// of its keys; the zero time while it is not a member of the ring. It is
// renewed through a majority of voters (package doc).
func (n *Node) LeaseUntil() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lease
}

// Status returns the node's view of its group.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.status
	s.Voters, s.Learners, s.Epoch = slices.Clone(s.Voters), slices.Clone(s.Learners), s.Epoch.Clone()
	return s
}

// Advert returns what this node advertises in its gossip metadata.
func (n *Node) Advert() Advert {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.advert
}

// DeadWait is Config.DeadWait for this node's configuration.
func (n *Node) DeadWait() time.Duration { return n.cfg.DeadWait() }

func (m *machine) status() Status {
	st := m.rn.BasicStatus()
	s := Status{RaftID: m.id, Group: m.group, Leader: st.RaftState == raft.StateLeader,
		Term: st.HardState.GetTerm(), Epoch: m.last.Clone()}
	if st.Lead != 0 {
		if lead := m.names([]uint64{st.Lead}); len(lead) == 1 {
			s.Lead = lead[0]
		}
	}
	s.Voters = m.names(m.cs.GetVoters())
	s.Learners = m.names(m.cs.GetLearners())
	return s
}

// addressBook maps Raft IDs to members: the applied members, and the view
// (a joiner is reached before it is a member).
func (m *machine) addressBook() map[uint64]ring.Member {
	book := make(map[uint64]ring.Member, len(m.members)+len(m.view))
	for _, p := range m.view {
		if p.RaftID != 0 {
			book[p.RaftID] = ring.Member{Name: p.Name, GRPCAddr: p.GRPCAddr}
		}
	}
	for name, mem := range m.members {
		book[mem.RaftID] = ring.Member{Name: name, GRPCAddr: mem.Addr}
	}
	return book
}
