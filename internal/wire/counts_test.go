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

// BenchmarkCodecCountScan is the cost of the count check on a peer
// CheckStream message of 64 items, against decoding it.
func BenchmarkCodecCountScan(b *testing.B) {
	items := make([]*sluicev1.PeerItem, 64)
	for i := range items {
		items[i] = &sluicev1.PeerItem{Hash: uint64(i) * 0x9e3779b97f4a7c15, Cost: 1, Limit: &sluicev1.PeerLimit{
			Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 100, PeriodNs: 60e9}}
	}
	data, err := proto.Marshal(&sluicev1.PeerCheckStreamRequest{Id: 7, Request: &sluicev1.PeerCheckRequest{From: "node-a", Items: items}})
	if err != nil {
		b.Fatal(err)
	}
	caps := capsOf(&sluicev1.PeerCheckStreamRequest{})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := checkCounts(data, caps); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		var m sluicev1.PeerCheckStreamRequest
		for b.Loop() {
			m.Reset()
			if err := m.UnmarshalVT(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
