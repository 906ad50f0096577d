package epoch

import (
	"maps"
	"slices"
	"strings"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// reconcile is the leader's membership reconciliation: when nothing is in
// flight (every entry of the log applied, no joint configuration, no
// leadership transfer), it compares the applied state with the gossip view
// and proposes the first change needed, in this order: remove the dead
// (and the restarted, whose Raft ID changed), remove the leavers, add the
// joiners as learners, then promote or demote to keep the voters at
// votersFor(members). It reports whether it proposed anything. A proposal
// lost to a leader change is simply derived again from the next view.
func (m *machine) reconcile() bool {
	if m.group == 0 || !m.hasView {
		return false
	}
	st := m.rn.BasicStatus()
	li, _ := m.store.LastIndex()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != 0 || m.appliedAt != li || len(m.cs.GetVotersOutgoing()) > 0 {
		return false
	}
	p := m.plan()
	switch {
	case p.transfer != 0:
		m.rn.TransferLeader(p.transfer)
	case p.cc != nil:
		if m.rn.ProposeConfChange(p.cc) != nil {
			return false
		}
	default:
		return false
	}
	return true
}

type proposal struct {
	cc       *raftpb.ConfChangeV2
	transfer uint64
}

// votersFor is how many voters n members have: the largest odd number at
// most min(MaxVoters, n). An even number adds no fault tolerance over one
// fewer (4 voters survive one failure, as 3 do) and needs a larger quorum.
func votersFor(n, max int) int {
	v := min(n, max)
	if v%2 == 0 {
		v--
	}
	return max0(v)
}

func max0(v int) int {
	if v < 0 {
		return 0
	}
	return v
}

// plan derives the next proposal from the applied state and the view.
func (m *machine) plan() proposal {
	li, _ := m.store.LastIndex()
	caughtUp := map[uint64]bool{}
	m.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		caughtUp[id] = pr.Match >= li
	})
	seen := map[string]Peer{}
	for _, p := range m.view {
		seen[p.Name] = p
	}
	voters, learners := setOf(m.cs.GetVoters()), setOf(m.cs.GetLearners())
	byID := map[uint64]string{}
	for name, mem := range m.members {
		byID[mem.RaftID] = name
	}
	// ready lists the learners that may be promoted, by name, but for skip.
	ready := func(skip uint64) []uint64 {
		var out []uint64
		for _, id := range slices.Sorted(maps.Keys(learners)) {
			if id != skip && caughtUp[id] && seen[byID[id]].Status == StatusAlive && seen[byID[id]].RaftID == id {
				out = append(out, id)
			}
		}
		slices.SortFunc(out, func(a, b uint64) int { return strings.Compare(byID[a], byID[b]) })
		return out
	}
	names := slices.Sorted(maps.Keys(m.members))

	// learning reports whether a new leader may still learn that some
	// alive learner is caught up: its progress starts unknown.
	learning := func() bool {
		if m.now.Sub(m.leaderSince) >= m.cfg.ElectionTimeout() {
			return false
		}
		for id := range learners {
			if seen[byID[id]].Status == StatusAlive && !caughtUp[id] {
				return true
			}
		}
		return false
	}
	remove := func(name string, kind Kind) proposal {
		id := m.members[name].RaftID
		changes := []*raftpb.ConfChangeSingle{single(raftpb.ConfChangeRemoveNode, id)}
		if voters[id] {
			want := votersFor(len(m.members)-1, m.cfg.MaxVoters)
			if have := len(voters) - 1; have < want {
				cands := ready(id)
				if len(cands) < want-have && kind == Leave && learning() {
					return proposal{} // a graceful leave can wait to replace its voter in the same change
				}
				for _, c := range cands[:min(len(cands), want-have)] {
					changes = append(changes, single(raftpb.ConfChangeAddNode, c))
				}
			} else if have > want {
				// No even count of voters, even for a moment: demote one too.
				for _, v := range slices.Sorted(maps.Keys(voters)) {
					if v != id && v != m.id {
						changes = append(changes, single(raftpb.ConfChangeAddLearnerNode, v))
						break
					}
				}
			}
		}
		rec := record{Kind: kind, Name: name, RaftID: id}
		return proposal{cc: confChange(changes, rec.encode())}
	}

	for _, name := range names {
		p, ok := seen[name]
		if name != m.cfg.Name && (!ok || p.Status == StatusDead || p.RaftID != 0 && p.RaftID != m.members[name].RaftID) {
			return remove(name, Dead)
		}
	}
	for _, name := range names {
		if seen[name].Status != StatusLeft {
			continue
		}
		if name != m.cfg.Name {
			return remove(name, Leave)
		}
		if len(m.members) == 1 {
			continue // the last member: nothing to hand the ring to
		}
		// The leader never removes itself: a removed leader may leave the
		// others in a joint configuration they cannot commit out of. It
		// hands leadership to a caught-up voter, making one if it is the
		// only voter, and the next leader removes it.
		for _, id := range slices.Sorted(maps.Keys(voters)) {
			if id != m.id && caughtUp[id] && seen[byID[id]].Status == StatusAlive {
				return proposal{transfer: id}
			}
		}
		if len(voters) == 1 {
			if cands := ready(m.id); len(cands) > 0 {
				return proposal{cc: confChange([]*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddNode, cands[0])}, nil)}
			}
		}
		return proposal{} // wait for a voter or a learner to catch up
	}
	// A new joiner first becomes a learner that is no member (no epoch,
	// no ring change), and joins the ring only once its log has caught
	// up: it then applies its Join epoch as soon as the others do and
	// serves the keys they route to it at once, rather than after a
	// catch-up that outlasts their calls' wait. Joiners join in name
	// order. A node under a Raft ID the log removed (it has not applied
	// its removal yet: cut off, say) joins at once as before, which sends
	// it the log, so that it applies its removal and restarts as a new
	// peer. A learner that is no member, and no alive node's, is removed.
	var joiners []Peer
	alive := map[uint64]bool{}
	for _, p := range m.view {
		if p.Status != StatusAlive || p.RaftID == 0 {
			continue
		}
		alive[p.RaftID] = true
		_, member := m.members[p.Name]
		_, taken := byID[p.RaftID]
		if !member && !taken && (p.Group == 0 || p.Group == m.group) && !voters[p.RaftID] {
			joiners = append(joiners, p)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(learners)) {
		if _, member := byID[id]; !member && !alive[id] {
			return proposal{cc: confChange([]*raftpb.ConfChangeSingle{single(raftpb.ConfChangeRemoveNode, id)}, nil)}
		}
	}
	join := func(p Peer) proposal {
		// Adding a learner again changes nothing in Raft.
		rec := record{Kind: Join, Name: p.Name, Addr: p.GRPCAddr, RaftID: p.RaftID}
		return proposal{cc: confChange([]*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddLearnerNode, p.RaftID)}, rec.encode())}
	}
	for _, p := range joiners {
		switch {
		case m.gone[p.RaftID] && !learners[p.RaftID]:
			return join(p)
		case !learners[p.RaftID]:
			return proposal{cc: confChange([]*raftpb.ConfChangeSingle{single(raftpb.ConfChangeAddLearnerNode, p.RaftID)}, nil)}
		}
	}
	for _, p := range joiners {
		if !m.gone[p.RaftID] {
			if caughtUp[p.RaftID] {
				return join(p)
			}
			break
		}
	}
	want := votersFor(len(m.members), m.cfg.MaxVoters)
	var changes []*raftpb.ConfChangeSingle
	switch have := len(voters); {
	case have < want:
		cands := ready(0)
		n := min(len(cands), want-have)
		if (have+n)%2 == 0 {
			n-- // keep the voters odd
		}
		for _, c := range cands[:max0(n)] {
			changes = append(changes, single(raftpb.ConfChangeAddNode, c))
		}
	case have > want:
		for _, id := range slices.Sorted(maps.Keys(voters)) {
			if len(changes) < have-want && id != m.id {
				changes = append(changes, single(raftpb.ConfChangeAddLearnerNode, id))
			}
		}
	}
	if len(changes) == 0 {
		return proposal{}
	}
	return proposal{cc: confChange(changes, nil)}
}

func single(t raftpb.ConfChangeType, id uint64) *raftpb.ConfChangeSingle {
	return &raftpb.ConfChangeSingle{Type: t.Enum(), NodeId: new(id)}
}

// confChange builds a conf change; several changes go through a joint
// configuration that Raft leaves by itself.
func confChange(changes []*raftpb.ConfChangeSingle, ctx []byte) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{Transition: raftpb.ConfChangeTransitionAuto.Enum(), Changes: changes, Context: ctx}
}
