package epoch

import (
	"encoding/binary"
	"math"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// pendingRemovals lists the peers that committed entries not yet applied
// remove. No message that renews a lease (append, heartbeat, snapshot)
// goes to them: once this leader knows the removal committed, the removed
// node renews from it no more, though Raft still tracks it until the
// entry is applied. (A removal not yet known to be committed may need the
// removed voter's acknowledgement, so those go.)
func (m *machine) pendingRemovals() map[uint64]bool {
	commit := m.rn.BasicStatus().HardState.GetCommit()
	if li, _ := m.store.LastIndex(); commit > li {
		commit = li
	}
	if commit <= m.appliedAt {
		return nil
	}
	ents, err := m.store.Entries(m.appliedAt+1, commit+1, math.MaxUint64)
	if err != nil {
		return nil
	}
	var out map[uint64]bool
	for _, e := range ents {
		var changes []*raftpb.ConfChangeSingle
		switch e.GetType() {
		case raftpb.EntryConfChange:
			c := &raftpb.ConfChange{}
			if proto.Unmarshal(e.GetData(), c) == nil {
				changes = c.AsV2().GetChanges()
			}
		case raftpb.EntryConfChangeV2:
			c := &raftpb.ConfChangeV2{}
			if proto.Unmarshal(e.GetData(), c) == nil {
				changes = c.GetChanges()
			}
		}
		for _, c := range changes {
			if c.GetType() == raftpb.ConfChangeRemoveNode {
				if out == nil {
					out = map[uint64]bool{}
				}
				out[c.GetNodeId()] = true
			}
		}
	}
	return out
}

// outgoingOnly lists the peers of a joint configuration that only its
// outgoing half holds: applied removals Raft still replicates to until the
// joint configuration is left. They get appends (which carry their
// removal) but no heartbeat or snapshot, so they renew no lease.
func (m *machine) outgoingOnly() map[uint64]bool {
	var out map[uint64]bool
	for _, id := range m.cs.GetVotersOutgoing() {
		if !slices.Contains(m.cs.GetVoters(), id) && !slices.Contains(m.cs.GetLearners(), id) {
			if out == nil {
				out = map[uint64]bool{}
			}
			out[id] = true
		}
	}
	return out
}

// startRound begins a lease round: a ReadIndex request, which Raft sends
// with the leader's next heartbeats and answers with a ReadState once a
// quorum of voters acknowledged them.
func (m *machine) startRound() {
	m.round++
	m.rounds[m.round] = m.now
	var ctx [8]byte
	binary.BigEndian.PutUint64(ctx[:], m.round)
	m.rn.ReadIndex(ctx[:])
	horizon := m.now.Add(-2 * m.cfg.ElectionTimeout())
	for r, sent := range m.rounds {
		if sent.Before(horizon) {
			delete(m.rounds, r)
		}
	}
}

// roundAcked renews the leader's lease from the send time of the round a
// quorum acknowledged.
func (m *machine) roundAcked(ctx []byte) {
	if len(ctx) != 8 {
		return
	}
	r := binary.BigEndian.Uint64(ctx)
	sent, ok := m.rounds[r]
	if !ok {
		return
	}
	for old := range m.rounds {
		if old <= r {
			delete(m.rounds, old)
		}
	}
	m.renew(sent.Add(m.cfg.LeaseDuration))
}

func (m *machine) renew(until time.Time) {
	if until.After(m.lease) {
		m.lease = until
	}
}

// leaseUntil is the time until which this node may act as an owner: its
// lease, while it is a member of the ring.
func (m *machine) leaseUntil() time.Time {
	if mem, ok := m.members[m.cfg.Name]; !ok || mem.RaftID != m.id {
		return time.Time{}
	}
	return m.lease
}
