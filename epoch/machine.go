package epoch

import (
	"io"
	"log"
	"maps"
	"slices"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rl/sluice/ring"
)

// member is a ring member as the applied log knows it.
type member struct {
	Addr   string
	RaftID uint64
}

// machine is the deterministic core of a Node: Raft, the applied epochs,
// the lease and the leader's reconciliation. It is driven by tick, step and
// setView, each given the current time, and leaves its output (messages to
// send, epochs applied) in outbox and epochs for the caller to take. It
// starts no goroutine and reads no clock; one goroutine drives it.
type machine struct {
	cfg    Config
	logger raft.Logger
	now    time.Time

	// Raft, replaced by reset.
	id        uint64
	store     *raft.MemoryStorage
	rn        *raft.RawNode
	appliedAt uint64 // index of the last applied entry
	resetDue  bool   // an applied entry removed this node

	// The applied state.
	group   uint64
	number  uint64
	members map[string]member
	gone    map[uint64]bool // Raft IDs of members the log removed
	cs      *raftpb.ConfState
	last    Epoch

	// The gossip view, sorted by name.
	view        []Peer
	hasView     bool
	leaderSince time.Time // when this node last became leader

	// The lease.
	lease   time.Time
	rounds  map[uint64]time.Time // leader: heartbeat round -> send time
	round   uint64
	hbTicks int

	// Output.
	outbox []Message // To unset: the caller resolves Raft.To
	epochs []applied
}

// applied is an epoch and the Raft ID of the incarnation that applied it
// (an entry may remove this node, which then resets before the caller
// takes the output).
type applied struct {
	by uint64
	Epoch
}

func newMachine(cfg Config) (*machine, error) {
	m := &machine{cfg: cfg, logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}}
	if err := m.reset(); err != nil {
		return nil, err
	}
	if cfg.BootstrapExpect == 1 {
		if err := m.found(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// reset drops all Raft state: the node becomes a new Raft peer (a new ID,
// an empty log), in no group, and waits to be added to one, or founds one.
// This is the seam for a data directory: a restored node would load its
// storage and applied state here instead.
func (m *machine) reset() error {
	m.id = m.cfg.NewID()
	m.store = raft.NewMemoryStorage()
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                m.id,
		ElectionTick:      m.cfg.ElectionTicks,
		HeartbeatTick:     m.cfg.HeartbeatTicks,
		Storage:           m.store,
		MaxSizePerMsg:     1 << 20,
		MaxInflightMsgs:   256,
		CheckQuorum:       true,
		PreVote:           true,
		StepDownOnRemoval: true,
		ReadOnlyOption:    raft.ReadOnlySafe,
		Logger:            m.logger,
	})
	if err != nil {
		return err
	}
	m.rn, m.appliedAt, m.resetDue = rn, 0, false
	m.group, m.number, m.members, m.cs, m.last = 0, 0, map[string]member{}, &raftpb.ConfState{}, Epoch{}
	m.gone = map[uint64]bool{}
	m.leaderSince, m.lease, m.rounds, m.round, m.hbTicks = time.Time{}, time.Time{}, map[uint64]time.Time{}, 0, 0
	return nil
}

// found makes this node a group of one: a new group ID, and the first
// entry of its log, the founding Join of this node.
func (m *machine) found() error {
	rec := record{Kind: Join, Name: m.cfg.Name, Addr: m.cfg.GRPCAddr, RaftID: m.id, Group: m.cfg.NewID()}
	if err := m.rn.Bootstrap([]raft.Peer{{ID: m.id, Context: rec.encode()}}); err != nil {
		return err
	}
	m.drain() // Raft campaigns only once the founding conf change is applied
	if err := m.rn.Campaign(); err != nil {
		return err
	}
	m.drain()
	return nil
}

func (m *machine) tick(now time.Time) {
	m.now = now
	m.rn.Tick()
	if m.isLeader() {
		m.hbTicks++
		if m.hbTicks >= m.cfg.HeartbeatTicks {
			m.hbTicks = 0
			m.startRound()
		}
	} else if len(m.rounds) > 0 {
		clear(m.rounds)
	}
	m.settle(true)
}

func (m *machine) step(now time.Time, group uint64, msg *raftpb.Message) {
	m.now = now
	if msg.GetTo() != m.id {
		return // for an earlier incarnation of this node
	}
	if group != 0 && m.group != 0 && group != m.group {
		return // from another group: no log mixes two
	}
	if err := m.rn.Step(msg); err != nil {
		return
	}
	renews := false
	switch msg.GetType() {
	case raftpb.MsgHeartbeat, raftpb.MsgApp, raftpb.MsgSnap:
		renews = true
	}
	m.settle(false)
	if !renews {
		return
	}
	// A follower renews from its current leader, once it knows that leader
	// committed an entry of its term: a new leader that may still hold an
	// unapplied removal of this node renews nothing (pendingRemovals).
	// An append renews only once this node knows all its leader committed:
	// one sent to a peer the leader's applied joint configuration removes
	// thus renews nothing (the peer applies its removal first).
	st := m.rn.BasicStatus()
	commit := st.HardState.GetCommit()
	commitTerm, err := m.store.Term(commit)
	if err == nil && st.Lead == msg.GetFrom() && st.HardState.GetTerm() == msg.GetTerm() &&
		commitTerm == msg.GetTerm() && st.RaftState != raft.StateLeader &&
		(msg.GetType() == raftpb.MsgHeartbeat || commit >= msg.GetCommit()) {
		m.renew(now.Add(m.cfg.LeaseDuration))
	}
}

func (m *machine) setView(now time.Time, view []Peer) {
	m.now = now
	m.view = slices.Clone(view)
	slices.SortFunc(m.view, func(a, b Peer) int { return strings.Compare(a.Name, b.Name) })
	m.hasView = true
	m.joinOrMerge()
	m.settle(true)
}

// settle processes Raft's output and, if propose, lets the leader
// propose, until nothing is left to do. Proposals are derived on ticks and
// views, not on every message.
func (m *machine) settle(propose bool) {
	for range 4 {
		m.drain()
		if lead := m.isLeader(); lead && m.leaderSince.IsZero() {
			m.leaderSince = m.now
		} else if !lead {
			m.leaderSince = time.Time{}
		}
		if m.resetDue {
			_ = m.reset() // NewRawNode fails only on a bad Config, which the first call accepted
			return
		}
		if !propose || !m.reconcile() {
			return
		}
	}
}

// drain takes Raft's Ready until none is left: stores entries, queues
// messages, applies committed entries, renews the leader's lease.
func (m *machine) drain() {
	for m.rn.HasReady() {
		rd := m.rn.Ready()
		if !raft.IsEmptySnap(rd.Snapshot) {
			_ = m.store.ApplySnapshot(rd.Snapshot) // never produced: the log is not compacted
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			_ = m.store.SetHardState(rd.HardState)
		}
		_ = m.store.Append(rd.Entries) // MemoryStorage fails only on a gap, which Raft never hands it
		removed, leaving := m.pendingRemovals(), m.outgoingOnly()
		for _, msg := range rd.Messages {
			to, t := msg.GetTo(), msg.GetType()
			if !removed[to] && !leaving[to] || t != raftpb.MsgApp && t != raftpb.MsgHeartbeat && t != raftpb.MsgSnap || !removed[to] && t == raftpb.MsgApp {
				m.outbox = append(m.outbox, Message{Group: m.group, Raft: msg})
			}
		}
		for _, e := range rd.CommittedEntries {
			m.apply(e)
		}
		for _, rs := range rd.ReadStates {
			m.roundAcked(rs.RequestCtx)
		}
		m.rn.Advance(rd)
		if m.resetDue {
			return
		}
	}
}

// apply applies one committed entry: a conf change, with the ring change
// its Context carries. An entry that does not apply to the current state
// (a stale or repeated proposal) is skipped, the same way on every node.
func (m *machine) apply(e *raftpb.Entry) {
	m.appliedAt = e.GetIndex()
	var cc raftpb.ConfChangeI
	var ctx []byte
	switch e.GetType() {
	case raftpb.EntryConfChange:
		c := &raftpb.ConfChange{}
		if proto.Unmarshal(e.GetData(), c) != nil {
			return
		}
		cc, ctx = c, c.GetContext()
	case raftpb.EntryConfChangeV2:
		c := &raftpb.ConfChangeV2{}
		if proto.Unmarshal(e.GetData(), c) != nil {
			return
		}
		cc, ctx = c, c.GetContext()
	default:
		return // the empty entry of a new term, or a refused proposal
	}
	var rec *record
	if len(ctx) > 0 {
		r, err := decodeRecord(ctx)
		if err != nil {
			m.logger.Warningf("epoch: skipping entry %d: %v", e.GetIndex(), err)
			return
		}
		rec = &r
	}
	if !m.valid(rec, cc.AsV2()) {
		return
	}
	m.cs = m.rn.ApplyConfChange(cc)
	if rec != nil && (rec.Kind == Dead || rec.Kind == Leave) {
		m.gone[rec.RaftID] = true
	}
	if rec != nil {
		m.applyRecord(*rec)
	}
}

func (m *machine) applyRecord(rec record) {
	switch rec.Kind {
	case Join:
		if rec.Group != 0 {
			m.group = rec.Group
		}
		m.members[rec.Name] = member{Addr: rec.Addr, RaftID: rec.RaftID}
	case Leave, Dead:
		delete(m.members, rec.Name)
	}
	m.number++
	e := Epoch{Group: m.group, Number: m.number, Change: Change{Kind: rec.Kind, Name: rec.Name}}
	for _, name := range slices.Sorted(maps.Keys(m.members)) {
		e.Members = append(e.Members, ring.Member{Name: name, GRPCAddr: m.members[name].Addr})
	}
	e.Voters = m.names(m.cs.GetVoters())
	m.last = e
	m.epochs = append(m.epochs, applied{by: m.id, Epoch: e.Clone()})
}

// valid reports whether a ring change and its conf change apply to the
// current state. Raft panics on a conf change that does not apply, so this
// checks what confchange.Changer would refuse.
func (m *machine) valid(rec *record, cc *raftpb.ConfChangeV2) bool {
	voters := setOf(m.cs.GetVoters())
	learners := setOf(m.cs.GetLearners())
	joint := len(m.cs.GetVotersOutgoing()) > 0
	if cc.LeaveJoint() {
		return joint && rec == nil
	}
	if joint {
		return false
	}
	touched := map[uint64]bool{}
	for _, c := range cc.GetChanges() {
		id := c.GetNodeId()
		touched[id] = true
		switch c.GetType() {
		case raftpb.ConfChangeAddNode:
			delete(learners, id)
			voters[id] = true
		case raftpb.ConfChangeAddLearnerNode:
			delete(voters, id)
			learners[id] = true
		case raftpb.ConfChangeRemoveNode:
			delete(voters, id)
			delete(learners, id)
		default:
			return false
		}
	}
	if len(voters) == 0 {
		return false
	}
	if rec == nil {
		return true
	}
	if !touched[rec.RaftID] {
		return false
	}
	cur, isMember := m.members[rec.Name]
	switch rec.Kind {
	case Join:
		if isMember || (rec.Group != 0) != (m.group == 0) {
			return false
		}
		for _, mem := range m.members {
			if mem.RaftID == rec.RaftID {
				return false
			}
		}
		return voters[rec.RaftID] || learners[rec.RaftID]
	default:
		return isMember && cur.RaftID == rec.RaftID && !voters[rec.RaftID] && !learners[rec.RaftID]
	}
}

// names maps Raft IDs to member names, sorted.
func (m *machine) names(ids []uint64) []string {
	var out []string
	for name, mem := range m.members {
		if slices.Contains(ids, mem.RaftID) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (m *machine) isLeader() bool { return m.rn.BasicStatus().RaftState == raft.StateLeader }

// takeOutput returns and clears the messages to send and the epochs
// applied since the last call.
func (m *machine) takeOutput() ([]Message, []applied) {
	msgs, eps := m.outbox, m.epochs
	m.outbox, m.epochs = nil, nil
	return msgs, eps
}

func setOf(ids []uint64) map[uint64]bool {
	s := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		s[id] = true
	}
	return s
}
