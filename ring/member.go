package ring

import (
	"errors"
	"strconv"
)

// ErrInvalidMember is returned by New for a member list it cannot place: a
// member with an empty Name, or two members with the same Name. The message
// names the member.
var ErrInvalidMember = errors.New("ring: invalid member")

// Member is one node of the cluster as the ring sees it.
type Member struct {
	// Name is the node's unique name (its memberlist name) and its only
	// identity on the ring: the virtual nodes are hashed from it, so a node
	// keeps its partitions across restarts and address changes. Must not be
	// empty.
	Name string
	// GRPCAddr is where to reach the node (host:port). It is carried along
	// for the caller and is not hashed: changing it moves nothing.
	GRPCAddr string
}

// ringMember is what a Member is to buraksezer/consistent: its String is the
// prefix of the member's virtual-node keys and idx its index in Ring.members.
type ringMember struct {
	key string
	idx int
}

// String returns the member's virtual-node key prefix.
func (m ringMember) String() string { return m.key }

// vnodePrefix returns the string buraksezer/consistent hashes, followed by
// the virtual node's decimal index, to place a member's virtual nodes. The
// library concatenates name and index, so with plain names "sluice-1"'s
// 23rd virtual node ("sluice-123") would collide with "sluice-12"'s 3rd. The
// length prefix makes the concatenation unambiguous: the decimal length runs
// up to the first ':', which fixes where the name ends and the index starts.
func vnodePrefix(name string) string {
	return strconv.Itoa(len(name)) + ":" + name
}
