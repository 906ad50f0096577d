package epoch

import (
	"errors"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, msg := range []Message{
		{Group: 0, Raft: &raftpb.Message{Type: raftpb.MsgVote.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Term: proto.Uint64(3)}},
		{Group: 1 << 63, Raft: &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: proto.Uint64(1 << 60), From: proto.Uint64(7),
			Entries: []*raftpb.Entry{{Term: proto.Uint64(1), Index: proto.Uint64(1), Data: []byte("x")}}}},
	} {
		b, err := MarshalMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalMessage(b)
		if err != nil || got.Group != msg.Group || !proto.Equal(got.Raft, msg.Raft) {
			t.Errorf("UnmarshalMessage(MarshalMessage(%v)) = %v, %v", msg, got, err)
		}
	}
	if _, err := MarshalMessage(Message{Group: 1}); !errors.Is(err, ErrBadMessage) {
		t.Errorf("MarshalMessage without a Raft message = %v, want ErrBadMessage", err)
	}
}

func TestUnmarshalMessageRejects(t *testing.T) {
	good, err := MarshalMessage(Message{Group: 5, Raft: &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(2), From: proto.Uint64(1)}})
	if err != nil {
		t.Fatal(err)
	}
	noTo, _ := MarshalMessage(Message{Group: 5, Raft: &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: proto.Uint64(1)}})
	badType, _ := MarshalMessage(Message{Group: 5, Raft: &raftpb.Message{Type: raftpb.MessageType(99).Enum(), To: proto.Uint64(2)}})
	for _, tc := range []struct {
		name, field string
		b           []byte
	}{
		{"empty", "version", nil},
		{"version", "version", append([]byte{2}, good[1:]...)},
		{"group truncated", "group", []byte{1, 0x80}},
		{"group overlong", "group", append([]byte{1, 0x85, 0x00}, good[2:]...)},
		{"raft garbage", "raft", append([]byte{1, 5}, 0xff, 0xff, 0xff)},
		{"raft to 0", "raft", noTo},
		{"raft unknown type", "raft", badType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := UnmarshalMessage(tc.b)
			if !errors.Is(err, ErrBadMessage) || !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("UnmarshalMessage = %v, want ErrBadMessage naming %s", err, tc.field)
			}
		})
	}
}

// FuzzUnmarshalMessage: the messages a peer sends over Peer/Raft are
// outside bytes. Decoding never panics, and what decodes encodes back to
// a message that decodes the same.
func FuzzUnmarshalMessage(f *testing.F) {
	for _, msg := range []Message{
		{Group: 9, Raft: &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Commit: proto.Uint64(4)}},
		{Raft: &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: proto.Uint64(3), Entries: []*raftpb.Entry{{Data: []byte{1, 2}}}}},
	} {
		b, err := MarshalMessage(msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := UnmarshalMessage(b)
		if err != nil {
			if !errors.Is(err, ErrBadMessage) {
				t.Fatalf("UnmarshalMessage(%x) = %v, not ErrBadMessage", b, err)
			}
			return
		}
		b2, err := MarshalMessage(msg)
		if err != nil {
			t.Fatalf("MarshalMessage(UnmarshalMessage(%x)): %v", b, err)
		}
		msg2, err := UnmarshalMessage(b2)
		if err != nil || msg2.Group != msg.Group || !proto.Equal(msg2.Raft, msg.Raft) {
			t.Fatalf("%x decodes as %v, which re-encodes to %v, %v", b, msg, msg2, err)
		}
	})
}
