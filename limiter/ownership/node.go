package ownership

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/ring"
)

// Errors of New, ApplyEpoch and Step; each wraps one of these and names the
// offending field.
var (
	// ErrInvalidConfig is returned by New for a bad Config or base Epoch.
	ErrInvalidConfig = errors.New("ownership: invalid config")
	// ErrInvalidEpoch is returned by ApplyEpoch for an epoch that is not
	// the next one or is malformed.
	ErrInvalidEpoch = errors.New("ownership: invalid epoch")
	// ErrInvalidMessage is returned by Step for a malformed message.
	ErrInvalidMessage = errors.New("ownership: invalid message")
)

// DefaultQueueLimit is Config.QueueLimit's default.
const DefaultQueueLimit = 1024

// Removal says how an epoch removed a member.
type Removal int

const (
	// Leave is a graceful leave: the member hands off what it holds.
	Leave Removal = iota + 1
	// Dead is a removal of a member that is gone (killed, or cut off and
	// its lease expired): it sends nothing more, and what it held is taken
	// from its heirs' copies.
	Dead
)

// Epoch is one entry of the agreed log of ring changes.
type Epoch struct {
	// Number is the epoch's position in the log; ApplyEpoch takes them in
	// order, each one more than the last.
	Number uint64
	// Ring is the ring of the epoch.
	Ring *ring.Ring
	// Heirs are Ring's heirs (Ring.Heirs(n)), computed once per epoch by
	// the caller. Nil means none: a dead owner's partitions start empty.
	Heirs *ring.Heirs
	// Removed names the members this epoch removed, and how.
	Removed map[string]Removal
}

// Config configures a Node.
type Config struct {
	// Self is this node's member name. Required.
	Self string
	// DeadOwnerWait is how long after applying an epoch that removes a
	// member as Dead the new owners of its partitions wait before deciding
	// them: the bound, from the epoch layer, within which the dead member's
	// owner lease has surely expired (lease length plus clock drift).
	// Must be >= 0.
	DeadOwnerWait time.Duration
	// QueueLimit bounds the messages from epochs this node has not applied
	// yet that it keeps; more are dropped (their senders send again).
	// 0 means DefaultQueueLimit.
	QueueLimit int
}

// Action is what a node does with a check of a key of a partition.
type Action int

// The actions of MayDecide.
const (
	// Decide: this node owns the partition in its latest epoch, holds its
	// state and its lease is valid.
	Decide Action = iota + 1
	// Forward to Decision.To, the owner in this node's latest epoch.
	Forward
	// Wait: this node owns the partition but has not settled it yet, or
	// is behind the epoch of its lease (it catches up first); the caller
	// holds the check or answers from the failure mode.
	Wait
	// Fallback: this node owns the partition but its lease has lapsed,
	// or it was removed as Dead; answer from the limit's failure mode.
	Fallback
)

// Decision is MayDecide's answer.
type Decision struct {
	Action Action
	To     string // the owner, for Forward
	Epoch  uint64 // the epoch the answer is made in
}

// Node is one node's ownership state machine. It has no goroutines and
// reads no clock; it is not safe for concurrent use.
type Node struct {
	cfg   Config
	epoch uint64
	ring  *ring.Ring
	heirs *ring.Heirs
	lease time.Time
	// leaseEpoch is the epoch the lease was granted in: the latest
	// committed when the majority renewed it.
	leaseEpoch uint64
	removed    Removal         // how an epoch removed Self, 0 while a member
	dead       map[string]bool // members removed as Dead
	slots      []slot
	queue      []Message
	ready      Ready
}

// New returns the machine of cfg.Self, starting at base: the last epoch
// before the one that adds Self (a node starts holding nothing, so it may
// not be a member of base).
func New(cfg Config, base Epoch) (*Node, error) {
	switch {
	case cfg.Self == "":
		return nil, fmt.Errorf("%w: Self must not be empty", ErrInvalidConfig)
	case cfg.DeadOwnerWait < 0:
		return nil, fmt.Errorf("%w: DeadOwnerWait must be >= 0, got %v", ErrInvalidConfig, cfg.DeadOwnerWait)
	case cfg.QueueLimit < 0:
		return nil, fmt.Errorf("%w: QueueLimit must be >= 0, got %d", ErrInvalidConfig, cfg.QueueLimit)
	case base.Ring == nil:
		return nil, fmt.Errorf("%w: base.Ring must not be nil", ErrInvalidConfig)
	case base.Heirs != nil && base.Heirs.Ring() != base.Ring:
		return nil, fmt.Errorf("%w: base.Heirs are not base.Ring's", ErrInvalidConfig)
	}
	if _, ok := base.Ring.Member(cfg.Self); ok {
		return nil, fmt.Errorf("%w: base.Ring has Self %q as a member: a node starts from the epoch before it joins",
			ErrInvalidConfig, cfg.Self)
	}
	if cfg.QueueLimit == 0 {
		cfg.QueueLimit = DefaultQueueLimit
	}
	return &Node{
		cfg:   cfg,
		epoch: base.Number,
		ring:  base.Ring,
		heirs: base.Heirs,
		dead:  map[string]bool{},
		slots: make([]slot, base.Ring.PartitionCount()),
	}, nil
}

// Epoch returns the number of the latest epoch applied.
func (n *Node) Epoch() uint64 { return n.epoch }

// Removed returns how an applied epoch removed this node, or 0.
func (n *Node) Removed() Removal { return n.removed }

// SetLease sets this node's owner lease, renewed through a majority by the
// epoch layer: it holds until the instant until, for epoch and the epochs
// after it. It counts only once the node has applied epoch: a node that
// is behind the log decides nothing as owner until it catches up.
func (n *Node) SetLease(until time.Time, epoch uint64) {
	n.lease, n.leaseEpoch = until, epoch
}

// ApplyEpoch applies the next epoch of the log at now.
func (n *Node) ApplyEpoch(e Epoch, now time.Time) error {
	switch {
	case e.Number != n.epoch+1:
		return fmt.Errorf("%w: Number must be %d, got %d", ErrInvalidEpoch, n.epoch+1, e.Number)
	case e.Ring == nil:
		return fmt.Errorf("%w: Ring must not be nil", ErrInvalidEpoch)
	case e.Ring.PartitionCount() != len(n.slots):
		return fmt.Errorf("%w: Ring has %d partitions, not %d", ErrInvalidEpoch, e.Ring.PartitionCount(), len(n.slots))
	case e.Heirs != nil && e.Heirs.Ring() != e.Ring:
		return fmt.Errorf("%w: Heirs are not Ring's", ErrInvalidEpoch)
	}
	for name, how := range e.Removed {
		if how != Leave && how != Dead {
			return fmt.Errorf("%w: Removed[%q] must be Leave or Dead, got %d", ErrInvalidEpoch, name, how)
		}
	}
	n.apply(e, now)
	return nil
}

func (n *Node) apply(e Epoch, now time.Time) {
	self := n.cfg.Self
	if n.removed == Dead {
		n.epoch, n.ring, n.heirs = e.Number, e.Ring, e.Heirs
		return
	}
	for p := range n.slots {
		prev, pok := n.ring.PartitionOwner(p)
		next, nok := e.Ring.PartitionOwner(p)
		if pok == nok && prev.Name == next.Name {
			continue
		}
		s := &n.slots[p]
		switch {
		case pok && prev.Name == self && nok:
			s.ops = append(s.ops, op{send: true, peer: next.Name, tag: e.Number})
		case pok && prev.Name == self:
			// The new ring has no members: the state has nowhere to go.
		case nok && next.Name == self:
			o := op{tag: e.Number}
			if pok {
				o.peer = prev.Name
				o.heirs = n.heirNames(p)
			}
			s.ops = append(s.ops, o)
		}
	}
	n.epoch, n.ring, n.heirs = e.Number, e.Ring, e.Heirs
	for name, how := range e.Removed {
		if how == Dead {
			n.dead[name] = true
		}
	}
	if how, ok := e.Removed[self]; ok {
		n.removed = how
		if how == Dead {
			// Declared dead: this node must restart as a new member. It
			// decides, sends and acknowledges nothing more.
			n.slots = make([]slot, len(n.slots))
			n.queue = nil
			n.ready = Ready{}
			return
		}
	}
	for p := range n.slots {
		n.reroute(p, now)
		n.advance(p)
	}
	n.drainQueue()
}

// heirNames returns the heirs of partition p on the current ring, in order.
func (n *Node) heirNames(p int) []string {
	if n.heirs == nil {
		return nil
	}
	var names []string
	for k := 0; k < n.heirs.Len(); k++ {
		if m, ok := n.heirs.Heir(uint64(p), k); ok {
			names = append(names, m.Name)
		}
	}
	return names
}

// reroute applies the dead set and the latest ring to partition p's
// pending operations: a handoff to a dead member is dropped, a state
// awaited from a dead member is taken from the first live heir instead
// (after DeadOwnerWait), and an heir that has gone is replaced by the next.
func (n *Node) reroute(p int, now time.Time) {
	s := &n.slots[p]
	kept := s.ops[:0]
	for _, o := range s.ops {
		switch {
		case o.send && n.dead[o.peer]:
			continue
		case !o.send && o.peer != "" && !o.heir && n.dead[o.peer]:
			o.heir = true
			o.peer = n.liveHeir(o.heirs)
			s.notBefore = later(s.notBefore, now.Add(n.cfg.DeadOwnerWait))
		case !o.send && o.heir && o.peer != "" && !n.present(o.peer):
			o.peer = n.liveHeir(o.heirs)
		}
		kept = append(kept, o)
	}
	s.ops = kept
	acked := s.unacked[:0]
	for _, u := range s.unacked {
		if !n.dead[u.to] {
			acked = append(acked, u)
		}
	}
	if len(acked) < len(s.unacked) {
		s.unacked = acked
		n.maybeRelease(p)
	}
}

// liveHeir returns the first of heirs that is Self or a member of the
// latest ring, or "" if none is: the state then starts empty.
func (n *Node) liveHeir(heirs []string) string {
	for _, h := range heirs {
		if n.present(h) {
			return h
		}
	}
	return ""
}

func (n *Node) present(name string) bool {
	if name == n.cfg.Self {
		return true
	}
	_, ok := n.ring.Member(name)
	return ok && !n.dead[name]
}

// MayDecide says what this node does now with a check of a key of
// partition p.
func (n *Node) MayDecide(p int, now time.Time) Decision {
	d := Decision{Epoch: n.epoch}
	if n.removed == Dead || p < 0 || p >= len(n.slots) {
		d.Action = Fallback
		return d
	}
	owner, ok := n.ring.PartitionOwner(p)
	switch {
	case !ok:
		d.Action = Fallback
	case owner.Name != n.cfg.Self:
		d.Action, d.To = Forward, owner.Name
	case !now.Before(n.lease):
		d.Action = Fallback
	case n.epoch < n.leaseEpoch || !n.slots[p].settled() || now.Before(n.slots[p].notBefore):
		d.Action = Wait
	default:
		d.Action = Decide
	}
	return d
}

// Drained reports whether a node removed by an applied epoch has nothing
// left to hand off: a leaving node may exit then.
func (n *Node) Drained() bool {
	if n.removed == 0 {
		return false
	}
	for i := range n.slots {
		if len(n.slots[i].ops) > 0 || len(n.slots[i].unacked) > 0 {
			return false
		}
	}
	return true
}

// Settled reports whether this node holds partition p as its owner with
// nothing pending (MayDecide may still say Wait until a dead owner's lease
// has surely expired).
func (n *Node) Settled(p int) bool {
	owner, ok := n.ring.PartitionOwner(p)
	return ok && owner.Name == n.cfg.Self && n.removed != Dead && n.slots[p].settled()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Pending describes, for status pages and debugging, the partitions with
// handoff work left: one line each, in partition order.
func (n *Node) Pending() []string {
	var out []string
	for p := range n.slots {
		s := &n.slots[p]
		if len(s.ops) == 0 && len(s.unacked) == 0 {
			continue
		}
		line := fmt.Sprintf("p%d holding=%v", p, s.holding)
		for _, o := range s.ops {
			switch {
			case o.send:
				line += fmt.Sprintf(" send(%s,e%d)", o.peer, o.tag)
			case o.heir:
				line += fmt.Sprintf(" fetch(%s,e%d)", o.peer, o.tag)
			default:
				line += fmt.Sprintf(" recv(%s,e%d)", o.peer, o.tag)
			}
		}
		for _, u := range s.unacked {
			line += fmt.Sprintf(" unacked(%s,e%d)", u.to, u.tag)
		}
		out = append(out, line)
	}
	return out
}

// Gone tells the node that member name has left and exited: membership
// saw its graceful leave, which it announces only once Drained, so it
// accepted everything handed to it. Handoffs to it that are still
// unacknowledged (their acknowledgements were lost) are done.
func (n *Node) Gone(name string) {
	for p := range n.slots {
		s := &n.slots[p]
		kept := s.unacked[:0]
		for _, u := range s.unacked {
			if u.to != name {
				kept = append(kept, u)
			}
		}
		if len(kept) < len(s.unacked) {
			s.unacked = kept
			n.maybeRelease(p)
		}
	}
}
