package cluster

import (
	"fmt"
	"time"

	"github.com/hashicorp/memberlist"
)

// The delegates below are how memberlist calls into a Cluster.
//
// Concurrency: memberlist calls the EventDelegate and ConflictDelegate
// methods serially, from several of its goroutines, while holding its node
// lock. They therefore copy what they need from the *memberlist.Node (the
// only moment its fields can be read without racing memberlist's in-place
// updates), take only Cluster.mu (a leaf lock: nothing calls memberlist
// while holding it), and never block: they mark the snapshot dirty and
// signal Run through a channel with a buffer of one, which coalesces
// bursts. Delegate methods are called from memberlist's goroutines, NodeMeta
// sometimes while Cluster.lifecycle is held by UpdateMeta or Leave.

// delegate implements memberlist.Delegate: it supplies the local metadata,
// handles the probe messages of the suspicion, and ignores user state,
// which Sluice does not gossip.
type delegate struct{ c *Cluster }

var _ memberlist.Delegate = delegate{}

// NodeMeta returns the encoded local metadata; its size was checked
// against memberlist.MetaMaxSize (the limit memberlist passes) when set.
func (d delegate) NodeMeta(limit int) []byte {
	d.c.metaMu.Lock()
	defer d.c.metaMu.Unlock()
	return d.c.meta
}

// NotifyMsg handles the probe messages of the suspicion (suspicion.go);
// it drops anything else, logging it at debug level.
func (d delegate) NotifyMsg(b []byte) {
	m, err := decodeProbe(b)
	if err != nil {
		d.c.log.Debug("cluster: user message dropped", "err", err)
		return
	}
	d.c.handleProbe(m)
}

// GetBroadcasts has no user broadcasts to send.
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState has no user state for push/pull.
func (delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState ignores remote user state.
func (delegate) MergeRemoteState(buf []byte, join bool) {}

// events implements memberlist.EventDelegate,
// memberlist.ConflictDelegate, memberlist.MergeDelegate and (installed on
// a node alone only) memberlist.AliveDelegate.
type events struct{ c *Cluster }

var (
	_ memberlist.AliveDelegate    = events{}
	_ memberlist.EventDelegate    = events{}
	_ memberlist.ConflictDelegate = events{}
	_ memberlist.MergeDelegate    = events{}
)

// NotifyMerge refuses a join's push/pull whose other side knows a live
// (alive or suspect) node by this node's name at another address: on the
// joining node, the cluster already has a node of that name, so its join
// fails (see joinSeeds); on a member, a newcomer claims the member's name,
// and the member keeps its state. memberlist calls it only for joins, not
// for the periodic push/pull, and without its node lock.
func (e events) NotifyMerge(peers []*memberlist.Node) error {
	if e.c.cfg.Alone {
		for _, p := range peers {
			if p.Name != e.c.name {
				return e.c.refuseAlone(p)
			}
		}
	}
	e.c.mu.Lock()
	self := e.c.members[e.c.name].GossipAddr // recorded during Create
	e.c.mu.Unlock()
	if err := e.c.protocol.checkMerge(peers); err != nil {
		return err
	}
	for _, p := range peers {
		if p.Name != e.c.name || (p.State != memberlist.StateAlive && p.State != memberlist.StateSuspect) {
			continue
		}
		if a := addrString(p.Addr, p.Port); a != self {
			return fmt.Errorf("%s: NodeName %q is used by the live member at %s (this node is %s); give each node a name of its own",
				nameTakenMsg, e.c.name, a, self)
		}
	}
	e.c.noteJoinSuspects(peers)
	return nil
}

// noteJoinSuspects records, while this node's first join is in flight,
// the members peers (a seed's state) lists as suspect, for
// contactSuspects.
func (c *Cluster) noteJoinSuspects(peers []*memberlist.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.joinSuspects == nil {
		return
	}
	for _, p := range peers {
		if p.State == memberlist.StateSuspect && p.Name != c.name {
			c.joinSuspects[p.Name] = addrString(p.Addr, p.Port)
		}
	}
}

// NotifyAlive refuses, on a node alone (Config.Alone), gossip about any
// other node, and otherwise a member whose peer protocol this node cannot
// run beside (protocol.go); memberlist then ignores it. Called with
// memberlist's node lock held; takes only leaf locks.
func (e events) NotifyAlive(n *memberlist.Node) error {
	if n.Name == e.c.name {
		return nil
	}
	if e.c.cfg.Alone {
		return e.c.refuseAlone(n)
	}
	return e.c.protocol.checkAlive(n)
}

// NotifyJoin records a new member, or one that came back, and logs it.
func (e events) NotifyJoin(n *memberlist.Node) {
	if n.Name != e.c.name {
		e.c.log.Info("cluster: member joined", "member", n.Name, "addr", addrString(n.Addr, n.Port))
	}
	e.c.upsert(n)
}

// NotifyUpdate records a member's new metadata (or address).
func (e events) NotifyUpdate(n *memberlist.Node) { e.c.upsert(n) }

// NotifyLeave records that a member is dead or left, and logs it.
func (e events) NotifyLeave(n *memberlist.Node) {
	state := e.c.remove(n.Name)
	e.c.log.Info("cluster: member left", "member", n.Name, "addr", addrString(n.Addr, n.Port), "state", state.String())
}

// NotifyConflict logs a node announcing the name of another at a different
// address: memberlist ignores it while the first one is alive.
func (e events) NotifyConflict(existing, other *memberlist.Node) {
	e.c.log.Warn("cluster: two nodes use one name; the second is ignored while the first is alive",
		"name", existing.Name,
		"existing", addrString(existing.Addr, existing.Port),
		"other", addrString(other.Addr, other.Port))
}

// upsert copies n into the member table. Called with memberlist's node
// lock held.
func (c *Cluster) upsert(n *memberlist.Node) {
	meta, leaving, err := decodeMeta(n.Meta)
	if err != nil {
		c.log.Warn("cluster: member metadata ignored", "member", n.Name, "err", err)
	}
	m := Member{
		Name:       n.Name,
		GossipAddr: addrString(n.Addr, n.Port),
		GRPCAddr:   meta.GRPCAddr,
		PeerAddr:   meta.PeerAddr,
		Version:    meta.Version,
		PolicyHash: meta.PolicyHash,
		RLSHash:    meta.RLSHash,
		Raft:       meta.Raft,
	}
	c.mu.Lock()
	m.State = c.stateOf(n.Name)
	c.members[n.Name] = m
	if leaving {
		c.leaving[n.Name] = true
	} else {
		delete(c.leaving, n.Name)
	}
	delete(c.departed, n.Name)
	c.dirty = true
	c.mu.Unlock()
	c.signal()
}

// remove moves a member from the table to the departed ones, and returns
// how it went (Dead or Left). Called with memberlist's node lock held.
func (c *Cluster) remove(name string) State {
	c.mu.Lock()
	state := Dead
	if c.leaving[name] {
		state = Left
	}
	delete(c.members, name)
	delete(c.leaving, name)
	c.susp.forget(name)
	c.departed[name] = departure{state: state, at: time.Now()}
	c.dirty = true
	c.mu.Unlock()
	c.signal()
	return state
}

// signal wakes Run without blocking; a pending signal already covers this
// change.
func (c *Cluster) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}
