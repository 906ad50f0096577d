package cluster

import (
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// State is the state of a member as seen by this node.
type State int

// Member states. The zero State is not a valid state.
const (
	// Alive: the member is up as far as this node knows.
	Alive State = iota + 1
	// Suspect: the member is still a member, but has not answered this
	// node's probes for a while (this node's own view,
	// not memberlist's suspicion, which memberlist v0.7.0 does not expose;
	// see the package documentation, "Suspicion"). It is Alive again at
	// its next answer, or Dead once memberlist declares it so.
	Suspect
	// Dead: the member was declared failed and is no longer a member.
	Dead
	// Left: the member left gracefully (Cluster.Leave) and is no longer a
	// member.
	Left
)

// String returns "alive", "suspect", "dead", "left" or "unknown".
func (s State) String() string {
	switch s {
	case Alive:
		return "alive"
	case Suspect:
		return "suspect"
	case Dead:
		return "dead"
	case Left:
		return "left"
	default:
		return "unknown"
	}
}

// Member is one member of the cluster as seen by this node.
type Member struct {
	// Name is the member's Config.NodeName.
	Name string
	// GossipAddr is the "ip:port" the member gossips at (its advertised
	// address).
	GossipAddr string
	// GRPCAddr is the member's NodeMeta.GRPCAddr; empty if it advertises
	// none or its metadata could not be decoded.
	GRPCAddr string
	// PeerAddr is the member's NodeMeta.PeerAddr: where its peer service
	// is; empty if it advertises none.
	PeerAddr string
	// Version is the member's NodeMeta.Version.
	Version string
	// PolicyHash is the member's NodeMeta.PolicyHash; empty if it
	// advertises none.
	PolicyHash string
	// RLSHash is the member's NodeMeta.RLSHash; empty if it advertises
	// none.
	RLSHash string
	// Raft is the member's NodeMeta.Raft: its advert in the Raft group of
	// the ring's epochs; zero if it advertises none.
	Raft RaftMeta
	// State is Alive or Suspect for a member of a Snapshot.
	State State
}

// Snapshot is the membership as seen by this node at one point in time. A
// Snapshot is immutable once built: its Members slice is shared between
// everyone holding the Snapshot and must not be modified.
type Snapshot struct {
	// Version increases with every change of Members (and only then),
	// starting at 1 for the first snapshot of this node. Versions of
	// different nodes are unrelated.
	Version uint64
	// Members lists the live members (Alive or Suspect), sorted by Name;
	// dead and left members are not listed. A member going suspect or
	// alive again is a change: it makes a new Version.
	// The local node is listed too, except after Cluster.Leave.
	Members []Member
}

// Member returns the member called name, if it is listed.
func (s Snapshot) Member(name string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(s.Members, name, func(m Member, name string) int {
		return strings.Compare(m.Name, name)
	})
	if !ok {
		return Member{}, false
	}
	return s.Members[i], true
}

// sortedMembers returns the members of a table sorted by name.
func sortedMembers(table map[string]Member) []Member {
	ms := make([]Member, 0, len(table))
	for _, m := range table {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return ms
}

// addrString formats a memberlist address as "ip:port", IPv4 addresses in
// dotted form whether they arrive as 4 or 16 bytes, so that equal
// addresses compare equal as strings.
func addrString(ip net.IP, port uint16) string {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
	}
	return netip.AddrPortFrom(a.Unmap(), port).String()
}
