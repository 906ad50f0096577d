package epoch

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/sluice-rl/sluice/ring"
)

// Kind is what an epoch's change did to the ring.
type Kind uint8

// The kinds of change.
const (
	// Join added a member.
	Join Kind = 1
	// Leave removed a member that left gracefully.
	Leave Kind = 2
	// Dead removed a member gossip declared dead, or one that restarted
	// without its Raft state (it joins again as a new peer). A new owner of
	// its keys waits Config.DeadWait after applying it.
	Dead Kind = 3
)

func (k Kind) String() string {
	switch k {
	case Join:
		return "join"
	case Leave:
		return "leave"
	case Dead:
		return "dead"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Change is the change that made an epoch.
type Change struct {
	// Kind is what happened.
	Kind Kind
	// Name is the member it happened to.
	Name string
}

// Epoch is one state of the ring, as every node applies it.
type Epoch struct {
	// Group is the Raft group whose log holds this epoch.
	Group uint64
	// Number counts the applied changes: 1, 2, 3... in the group.
	Number uint64
	// Members are the ring's members, sorted by name.
	Members []ring.Member
	// Voters are the names of the members that were Raft voters when this
	// epoch was applied, sorted. A promotion between epochs changes the
	// voters but not the ring, so it makes no epoch (Node.Status has the
	// current voters).
	Voters []string
	// Change is the change that made this epoch.
	Change Change
}

// Clone returns a deep copy of e.
func (e Epoch) Clone() Epoch {
	e.Members = slices.Clone(e.Members)
	e.Voters = slices.Clone(e.Voters)
	return e
}

// record is what a log entry carries in its conf change's Context: one ring
// change. A conf change with an empty Context (a promotion, leaving a joint
// configuration) carries none.
type record struct {
	Kind   Kind
	Name   string
	Addr   string // Join only
	RaftID uint64 // the member's Raft ID
	Group  uint64 // the founding Join only: the new group's ID
}

// The record format, version 1: the byte 1, the kind byte, the Raft ID and
// the group ID as uvarints, then the name and the address, each a uvarint
// length and its bytes. Nothing may follow.
const (
	recordVersion = 1
	maxString     = 256
)

func (r record) encode() []byte {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+4+len(r.Name)+len(r.Addr))
	b = append(b, recordVersion, byte(r.Kind))
	b = binary.AppendUvarint(b, r.RaftID)
	b = binary.AppendUvarint(b, r.Group)
	b = binary.AppendUvarint(b, uint64(len(r.Name)))
	b = append(b, r.Name...)
	b = binary.AppendUvarint(b, uint64(len(r.Addr)))
	return append(b, r.Addr...)
}

// decodeRecord decodes a record; every error wraps ErrBadRecord and names
// the field.
func decodeRecord(b []byte) (record, error) {
	var r record
	bad := func(field, format string, args ...any) (record, error) {
		return record{}, fmt.Errorf("%w: %s: %s", ErrBadRecord, field, fmt.Sprintf(format, args...))
	}
	if len(b) < 2 {
		return bad("version", "record of %d bytes", len(b))
	}
	if b[0] != recordVersion {
		return bad("version", "is %d, want %d", b[0], recordVersion)
	}
	r.Kind = Kind(b[1])
	if r.Kind < Join || r.Kind > Dead {
		return bad("kind", "is %d", b[1])
	}
	b = b[2:]
	var n int
	if r.RaftID, n = uvarint(b); n <= 0 {
		return bad("raftID", "bad uvarint")
	}
	b = b[n:]
	if r.RaftID == 0 {
		return bad("raftID", "is 0")
	}
	if r.Group, n = uvarint(b); n <= 0 {
		return bad("group", "bad uvarint")
	}
	b = b[n:]
	var err error
	if r.Name, b, err = decodeString(b); err != nil {
		return bad("name", "%v", err)
	}
	if r.Name == "" {
		return bad("name", "is empty")
	}
	if r.Addr, b, err = decodeString(b); err != nil {
		return bad("addr", "%v", err)
	}
	if r.Kind == Join && r.Addr == "" {
		return bad("addr", "is empty in a join")
	}
	if r.Kind != Join && (r.Addr != "" || r.Group != 0) {
		return bad("kind", "a %v carries an address or a group", r.Kind)
	}
	if len(b) != 0 {
		return bad("end", "%d trailing bytes", len(b))
	}
	return r, nil
}

func decodeString(b []byte) (string, []byte, error) {
	l, n := uvarint(b)
	switch {
	case n <= 0:
		return "", nil, fmt.Errorf("bad length")
	case l > maxString:
		return "", nil, fmt.Errorf("length %d over %d", l, maxString)
	case uint64(len(b)-n) < l:
		return "", nil, fmt.Errorf("length %d beyond the record", l)
	}
	return string(b[n : n+int(l)]), b[n+int(l):], nil
}

// uvarint is binary.Uvarint refusing the longer encodings of a value (n
// is 0 then), so each record has one encoding.
func uvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 0 && n != binary.PutUvarint(make([]byte, binary.MaxVarintLen64), v) {
		return 0, 0
	}
	return v, n
}
