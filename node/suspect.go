package node

import (
	"slices"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/ring"
)

// Suspect members: the cluster reports a member Suspect when it stops
// answering this node's probes (cluster's package documentation,
// "Suspicion"). onMembership hands the suspects to the limiter, which
// then answers their keys by the failure mode at once, without calling
// them (limiter.SetSuspects); a change of suspicion alone keeps the ring.
// The Membership API and sluice_members also show as suspect a member
// whose circuit breaker rejects calls (transport.PeerClient.CircuitRejects:
// open, until its cooldown ends): its keys are answered by the failure
// mode at once too, by the breaker. The
// limiter is told only of the cluster's suspects: the breaker needs calls
// to close again.

// suspectsOf returns the names of the members s reports Suspect.
func suspectsOf(s cluster.Snapshot) []string {
	var out []string
	for _, m := range s.Members {
		if m.State == cluster.Suspect {
			out = append(out, m.Name)
		}
	}
	return out
}

// ringMembers returns the ring's view of the members of s.
func ringMembers(s cluster.Snapshot) []ring.Member {
	members := make([]ring.Member, 0, len(s.Members))
	for _, m := range s.Members {
		if rm, ok := ringMember(m); ok {
			members = append(members, rm)
		}
	}
	return members
}

// stateless returns the members of s with every State set to Alive and
// every Raft advert cleared.
func stateless(s cluster.Snapshot) []cluster.Member {
	out := slices.Clone(s.Members)
	for i := range out {
		out[i].State = cluster.Alive
		out[i].Raft = cluster.RaftMeta{}
	}
	return out
}

// onlyStatesChanged reports whether s differs from the snapshot the ring
// in force was last built from only in members' states (a suspicion
// began or ended) or Raft adverts (which change with every epoch a member
// applies, epochs.go): anything else, metadata included, rebuilds the
// ring and hands off, as any snapshot did before suspicion existed.
// Called from onMembership only.
func (n *Node) onlyStatesChanged(s cluster.Snapshot) bool {
	return n.builtFrom != nil && slices.Equal(n.builtFrom, stateless(s))
}

// memberState is the state the node shows for member m: Suspect if the
// cluster suspects it or its circuit breaker rejects calls.
func (n *Node) memberState(m cluster.Member) cluster.State {
	if m.State == cluster.Alive && m.Name != n.cfg.NodeName && n.peers.CircuitRejects(m.Name) {
		return cluster.Suspect
	}
	return m.State
}
