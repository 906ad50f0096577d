package ownership

import (
	"fmt"
	"time"
)

// Kind is a protocol message's kind.
type Kind int

// The kinds of Message.
const (
	// MsgDone carries partition Partition's states (States) and says the
	// sender has handed them off for epoch For: the receiver may decide
	// them, or pass them on, once merged. From an heir (Heir), it carries
	// the heir's copy.
	MsgDone Kind = iota + 1
	// MsgAck acknowledges the MsgDone of Partition for epoch For: its
	// sender may delete its copy.
	MsgAck
	// MsgFetch asks an heir for its copy of Partition, for epoch For.
	MsgFetch
	// MsgRedirect tells the receiver that it is behind: the sender has
	// applied epoch Epoch.
	MsgRedirect
)

// Message is a protocol message between nodes. Every message carries its
// sender's latest epoch (Epoch).
type Message struct {
	Kind      Kind
	From, To  string
	Epoch     uint64 // the sender's latest epoch
	Partition int
	For       uint64    // the epoch of the handoff
	Heir      bool      // a MsgDone with an heir's copy
	NotBefore time.Time // a MsgDone: the receiver decides its states no earlier
	States    any       // a MsgDone: the partition's states, opaque here
}

// Transfer asks the caller to copy partition Msg.Partition's states (from
// its replica copies if FromReplica, else from its store) into Msg.States
// and send Msg. The caller keeps the store's copy until a Release of the
// partition: the transfer may be asked for again.
type Transfer struct {
	Msg         Message
	FromReplica bool
}

// Merge asks the caller to replace partition Partition's states in its
// store by States (nil: by nothing, the states are lost), or by its
// replica copies if FromReplica.
type Merge struct {
	Partition   int
	States      any
	FromReplica bool
}

// Ready is what a node asks its caller to do, in this order: apply
// Merges, send Transfers, send Messages, delete the Released partitions'
// states, and fetch the epochs up to CatchUp.
type Ready struct {
	Merges    []Merge
	Transfers []Transfer
	Messages  []Message
	Releases  []int
	CatchUp   uint64 // a peer has applied this epoch; 0 if none is known
}

// Empty reports whether r asks for nothing.
func (r Ready) Empty() bool {
	return len(r.Merges) == 0 && len(r.Transfers) == 0 && len(r.Messages) == 0 && len(r.Releases) == 0 && r.CatchUp == 0
}

// Ready returns what the node asks of its caller since the last call.
func (n *Node) Ready() Ready {
	r := n.ready
	n.ready = Ready{}
	return r
}

// op is one step of a partition's handoff chain on this node.
type op struct {
	send  bool
	peer  string // send: to; receive: from ("" with !heir: nobody held it)
	tag   uint64 // the epoch of the handoff
	heir  bool   // receive an heir's copy (the holder was removed as Dead)
	heirs []string
}

type sent struct {
	to        string
	tag       uint64
	notBefore time.Time
}

// slot is one partition on this node.
type slot struct {
	ops          []op // pending, in epoch order
	holding      bool // the store's states of the partition are current
	notBefore    time.Time
	unacked      []sent
	lastAccepted uint64
}

func (s *slot) settled() bool { return len(s.ops) == 0 && s.holding }

// advance runs partition p's pending operations as far as they go.
func (n *Node) advance(p int) {
	s := &n.slots[p]
	for len(s.ops) > 0 {
		o := s.ops[0]
		switch {
		case o.send:
			if !s.holding {
				return
			}
			u := sent{to: o.peer, tag: o.tag, notBefore: s.notBefore}
			s.unacked = append(s.unacked, u)
			n.transfer(p, u)
			s.holding = false
		case !o.heir && o.peer == "":
			// Nobody held the partition before (a new ring): it starts
			// empty.
			s.holding = true
		case o.heir && o.peer == n.cfg.Self:
			n.ready.Merges = append(n.ready.Merges, Merge{Partition: p, FromReplica: true})
			s.holding = true
		case o.heir && o.peer == "":
			n.ready.Merges = append(n.ready.Merges, Merge{Partition: p})
			s.holding = true
		case o.heir:
			n.fetch(p, o)
			return
		default:
			return // await the holder's MsgDone
		}
		s.ops = s.ops[1:]
	}
}

func (n *Node) transfer(p int, u sent) {
	n.ready.Transfers = append(n.ready.Transfers, Transfer{Msg: Message{
		Kind: MsgDone, From: n.cfg.Self, To: u.to, Epoch: n.epoch, Partition: p,
		For: u.tag, NotBefore: u.notBefore,
	}})
}

func (n *Node) fetch(p int, o op) {
	n.send(Message{Kind: MsgFetch, To: o.peer, Partition: p, For: o.tag})
}

func (n *Node) send(m Message) {
	m.From, m.Epoch = n.cfg.Self, n.epoch
	n.ready.Messages = append(n.ready.Messages, m)
}

func (n *Node) maybeRelease(p int) {
	s := &n.slots[p]
	if len(s.ops) == 0 && !s.holding && len(s.unacked) == 0 {
		n.ready.Releases = append(n.ready.Releases, p)
	}
}

// Tick sends again what has not been answered: handoffs not acknowledged
// and fetches of heirs' copies. The caller calls it at its retry interval.
func (n *Node) Tick() {
	if n.removed == Dead {
		return
	}
	for p := range n.slots {
		s := &n.slots[p]
		for _, u := range s.unacked {
			n.transfer(p, u)
		}
		if len(s.ops) > 0 && s.ops[0].heir && s.ops[0].peer != "" && s.ops[0].peer != n.cfg.Self {
			n.fetch(p, s.ops[0])
		}
	}
}

// Step takes a message from a peer.
func (n *Node) Step(m Message) error {
	switch {
	case m.To != n.cfg.Self:
		return fmt.Errorf("%w: To is %q, not this node (%q)", ErrInvalidMessage, m.To, n.cfg.Self)
	case m.From == "":
		return fmt.Errorf("%w: From must not be empty", ErrInvalidMessage)
	case m.Kind < MsgDone || m.Kind > MsgRedirect:
		return fmt.Errorf("%w: Kind %d is unknown", ErrInvalidMessage, m.Kind)
	case m.Partition < 0 || m.Partition >= len(n.slots):
		return fmt.Errorf("%w: Partition must be in [0, %d), got %d", ErrInvalidMessage, len(n.slots), m.Partition)
	case m.Kind != MsgRedirect && m.For == 0:
		return fmt.Errorf("%w: For must be > 0", ErrInvalidMessage)
	}
	if n.removed == Dead {
		return nil
	}
	if m.Epoch > n.epoch {
		n.ready.CatchUp = max(n.ready.CatchUp, m.Epoch)
		if m.Kind != MsgRedirect && len(n.queue) < n.cfg.QueueLimit {
			n.queue = append(n.queue, m)
		}
		return nil
	}
	n.step(m)
	return nil
}

func (n *Node) step(m Message) {
	s := &n.slots[m.Partition]
	switch m.Kind {
	case MsgDone:
		if len(s.ops) > 0 && !s.ops[0].send && s.ops[0].peer == m.From && s.ops[0].tag == m.For && s.ops[0].heir == m.Heir {
			n.ready.Merges = append(n.ready.Merges, Merge{Partition: m.Partition, States: m.States})
			s.holding = true
			s.notBefore = later(s.notBefore, m.NotBefore)
			s.lastAccepted = max(s.lastAccepted, m.For)
			s.ops = s.ops[1:]
			if !m.Heir {
				n.send(Message{Kind: MsgAck, To: m.From, Partition: m.Partition, For: m.For})
			}
			n.advance(m.Partition)
			return
		}
		switch {
		case m.Heir:
			// An heir's answer no longer awaited: nothing to do.
		case n.dead[m.From]:
			n.send(Message{Kind: MsgRedirect, To: m.From, Partition: m.Partition})
		case n.awaits(m):
			// Awaited after an earlier step: the sender sends again.
		default:
			// Accepted before (its MsgAck was lost): acknowledge again.
			n.send(Message{Kind: MsgAck, To: m.From, Partition: m.Partition, For: m.For})
		}
	case MsgAck:
		for i, u := range s.unacked {
			if u.to == m.From && u.tag == m.For {
				s.unacked = append(s.unacked[:i], s.unacked[i+1:]...)
				n.maybeRelease(m.Partition)
				break
			}
		}
	case MsgFetch:
		n.ready.Transfers = append(n.ready.Transfers, Transfer{FromReplica: true, Msg: Message{
			Kind: MsgDone, From: n.cfg.Self, To: m.From, Epoch: n.epoch, Partition: m.Partition,
			For: m.For, Heir: true,
		}})
	case MsgRedirect:
	}
}

func (n *Node) awaits(m Message) bool {
	for _, o := range n.slots[m.Partition].ops {
		if !o.send && !o.heir && o.peer == m.From && o.tag == m.For {
			return true
		}
	}
	return false
}

// drainQueue steps the queued messages of epochs now applied.
func (n *Node) drainQueue() {
	kept := n.queue[:0]
	var due []Message
	for _, m := range n.queue {
		if m.Epoch <= n.epoch {
			due = append(due, m)
		} else {
			kept = append(kept, m)
		}
	}
	n.queue = kept
	for _, m := range due {
		n.step(m)
	}
}
