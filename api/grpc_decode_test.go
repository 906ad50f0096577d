package api

import (
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// fullStream is a CheckStream message with every field of an item set,
// decoded before each case so that the slots hold values to leak.
func fullStream() *sluicev1.CheckStreamRequest {
	cost := int64(3)
	return &sluicev1.CheckStreamRequest{Id: 9, Items: []*sluicev1.CheckItem{
		{Key: "a", Cost: &cost, UpTo: true, Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{
			Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 5, Period: durationpb.New(time.Minute + 1),
			Burst: 7, FailureMode: sluicev1.FailureMode_FAILURE_MODE_DENY, Calendar: sluicev1.Calendar_CALENDAR_DAY,
			Timezone: "Europe/Paris"}}},
		{Key: "b", Spec: &sluicev1.CheckItem_Policy{Policy: "login"}},
		{Key: "c", Cost: &cost},
	}}
}

// checkDecode decodes data into r as the server's codec does and fails t
// unless the outcome is the generated decoder's: the same error, or an
// equal message.
func checkDecode(t *testing.T, r *streamRequest, data []byte) {
	t.Helper()
	var want sluicev1.CheckStreamRequest
	wantErr := want.UnmarshalVT(data)
	gotErr := wire.Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, r)
	switch {
	case (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()):
		t.Fatalf("decode %x: error %v, want %v", data, gotErr, wantErr)
	case gotErr == nil && !proto.Equal(&r.CheckStreamRequest, &want):
		t.Fatalf("decode %x:\n got %v\nwant %v", data, &r.CheckStreamRequest, &want)
	}
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A message decoded into a reused request is the generated decoder's,
// whatever the request held before: fields absent now are absent, and
// what the fast path leaves to the generated decoder (unknown fields, a
// limit after a policy, a repeated limit or period, which merge) decodes
// as it does.
func TestDecodeStreamReuse(t *testing.T) {
	lim := func(l *sluicev1.Limit) *sluicev1.CheckItem_Limit { return &sluicev1.CheckItem_Limit{Limit: l} }
	item := func(num protowire.Number, m proto.Message) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), marshal(t, m))
	}
	stream := func(items ...[]byte) []byte {
		var b []byte
		for _, it := range items {
			b = protowire.AppendBytes(protowire.AppendTag(b, 2, protowire.BytesType), it)
		}
		return b
	}
	cases := map[string][]byte{
		"empty":       nil,
		"sparse":      marshal(t, &sluicev1.CheckStreamRequest{Items: []*sluicev1.CheckItem{{Key: "a"}, {}}}),
		"new strings": marshal(t, &sluicev1.CheckStreamRequest{Items: []*sluicev1.CheckItem{{Key: "z", Spec: &sluicev1.CheckItem_Policy{Policy: "p"}}}}),
		"no period":   marshal(t, &sluicev1.CheckStreamRequest{Items: []*sluicev1.CheckItem{{Key: "a", Spec: lim(&sluicev1.Limit{Limit: 1})}}}),
		"more items":  marshal(t, &sluicev1.CheckStreamRequest{Items: make([]*sluicev1.CheckItem, 5)}),
		"unknown":     protowire.AppendVarint(protowire.AppendTag(marshal(t, fullStream()), 99, protowire.VarintType), 1),
		"limit after policy": stream(append(item(3, nil), // an empty policy, then a limit
			item(2, &sluicev1.Limit{Limit: 2})...)),
		"policy after limit": stream(append(item(2, &sluicev1.Limit{Limit: 2}), protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "p")...)),
		"two limits":         stream(append(item(2, &sluicev1.Limit{Limit: 2, Burst: 4}), item(2, &sluicev1.Limit{Period: durationpb.New(time.Second)})...)),
		"truncated":          marshal(t, fullStream())[:20],
	}
	// One limit with its period twice.
	twoPeriods := append(item(3, &durationpb.Duration{Seconds: 1}), item(3, &durationpb.Duration{Nanos: 5})...)
	cases["two periods"] = stream(protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), twoPeriods))
	full := marshal(t, fullStream())
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			r := new(streamRequest)
			checkDecode(t, r, full)
			checkDecode(t, r, data)
			checkDecode(t, r, full)
		})
	}
}

// Decoding a one-item message into a pooled request allocates nothing
// once the request has decoded one before.
func TestDecodeStreamAllocs(t *testing.T) {
	data := mem.BufferSlice{mem.SliceBuffer(marshal(t, &sluicev1.CheckStreamRequest{Id: 1, Items: []*sluicev1.CheckItem{
		inline("bench:0", 1e9, time.Second, nil)}}))}
	r := new(streamRequest)
	allocs := testing.AllocsPerRun(100, func() {
		if err := (wire.Codec{}).Unmarshal(data, r); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations a message, want 0", allocs)
	}
}

// FuzzDecodeStream: any bytes decoded as a CheckStream message into a
// reused request give the generated decoder's message or error.
func FuzzDecodeStream(f *testing.F) {
	f.Add(marshal(f, fullStream()))
	f.Add(marshal(f, &sluicev1.CheckStreamRequest{Id: 1, Items: []*sluicev1.CheckItem{inline("k", 1, time.Second, nil)}}))
	full := marshal(f, fullStream())
	f.Fuzz(func(t *testing.T, data []byte) {
		r := new(streamRequest)
		checkDecode(t, r, full)
		checkDecode(t, r, data)
		checkDecode(t, r, data)
	})
}
