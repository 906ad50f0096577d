package wire

import (
	"errors"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// The codec counts the items of a peer message's repeated field on the
// wire before decoding it: 100,000 empty states (200 KB encoded, tens of
// MB decoded) are refused without being decoded, at the bound they pass.
func TestCodecChecksCountsBeforeDecoding(t *testing.T) {
	states := func(n int) []*sluicev1.KeyState {
		out := make([]*sluicev1.KeyState, n)
		for i := range out {
			out[i] = &sluicev1.KeyState{}
		}
		return out
	}
	items := func(n int) []*sluicev1.PeerItem {
		out := make([]*sluicev1.PeerItem, n)
		for i := range out {
			out[i] = &sluicev1.PeerItem{}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		msg  proto.Message
		into proto.Message
		ok   bool
	}{
		{"handoff at the bound", &sluicev1.HandoffRequest{From: "a", States: states(MaxHandoffStates)}, &sluicev1.HandoffRequest{}, true},
		{"handoff of 100,000", &sluicev1.HandoffRequest{From: "a", States: states(100_000)}, &sluicev1.HandoffRequest{}, false},
		{"fetch answer over the bound", &sluicev1.FetchResponse{States: states(MaxHandoffStates + 1)}, &sluicev1.FetchResponse{}, false},
		{"peer check over the bound", &sluicev1.PeerCheckRequest{Items: items(MaxPeerBatch + 1)}, &sluicev1.PeerCheckRequest{}, false},
		{"peer stream message at the bound", &sluicev1.PeerCheckStreamRequest{Id: 1, Request: &sluicev1.PeerCheckRequest{Items: items(MaxPeerBatch)}}, &sluicev1.PeerCheckStreamRequest{}, true},
		{"peer stream message over the bound", &sluicev1.PeerCheckStreamRequest{Id: 1, Request: &sluicev1.PeerCheckRequest{Items: items(MaxPeerBatch + 1)}}, &sluicev1.PeerCheckStreamRequest{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			err = Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, tc.into)
			if tc.ok && err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !tc.ok && !errors.Is(err, ErrTooManyItems) {
				t.Fatalf("Unmarshal: %v, want ErrTooManyItems", err)
			}
			if !tc.ok && !proto.Equal(tc.into, tc.into.ProtoReflect().Type().New().Interface()) {
				t.Fatal("a refused message was decoded")
			}
		})
	}
}
