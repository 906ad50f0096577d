package epoch

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// ErrBadMessage is wrapped by every error UnmarshalMessage returns.
var ErrBadMessage = errors.New("epoch: bad message")

// The message format between nodes, version 1: the byte 1, the sender's
// group (Message.Group) as a uvarint, then the raftpb.Message in its
// protobuf encoding. The transport carries it as opaque bytes.
const messageVersion = 1

// MarshalMessage encodes msg (its Group and Raft; To is the transport's)
// in the message format.
func MarshalMessage(msg Message) ([]byte, error) {
	if msg.Raft == nil {
		return nil, fmt.Errorf("%w: raft: is nil", ErrBadMessage)
	}
	b, err := proto.Marshal(msg.Raft)
	if err != nil {
		return nil, fmt.Errorf("%w: raft: %v", ErrBadMessage, err)
	}
	out := make([]byte, 0, 1+10+len(b))
	out = append(out, messageVersion)
	out = binary.AppendUvarint(out, msg.Group)
	return append(out, b...), nil
}

// UnmarshalMessage decodes a message of MarshalMessage's format; every
// error wraps ErrBadMessage and names the field (version, group, raft).
// A Raft message to ID 0, or of no type this version knows, is refused
// (raft).
func UnmarshalMessage(b []byte) (Message, error) {
	bad := func(field, format string, args ...any) (Message, error) {
		return Message{}, fmt.Errorf("%w: %s: %s", ErrBadMessage, field, fmt.Sprintf(format, args...))
	}
	if len(b) == 0 {
		return bad("version", "empty message")
	}
	if b[0] != messageVersion {
		return bad("version", "is %d, want %d", b[0], messageVersion)
	}
	group, n := uvarint(b[1:])
	if n <= 0 {
		return bad("group", "bad uvarint")
	}
	rm := &raftpb.Message{}
	if err := proto.Unmarshal(b[1+n:], rm); err != nil {
		return bad("raft", "%v", err)
	}
	if rm.GetTo() == 0 {
		return bad("raft", "to Raft ID 0")
	}
	if _, known := raftpb.MessageType_name[int32(rm.GetType())]; rm.Type == nil || !known {
		return bad("raft", "no type, or one this version does not know")
	}
	return Message{Group: group, Raft: rm}, nil
}
