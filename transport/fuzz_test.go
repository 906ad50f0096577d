package transport

import (
	"context"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/store"
)

// decodeWire decodes data into m as the gRPC server does, through the
// vtprotobuf codec.
func decodeWire(data []byte, m proto.Message) error {
	return wire.Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, m)
}

// encodeWire encodes m through the vtprotobuf codec.
func encodeWire(t *testing.T, m proto.Message) []byte {
	t.Helper()
	bs, err := wire.Codec{}.Marshal(m)
	if err != nil {
		t.Fatalf("Marshal %T: %v", m, err)
	}
	defer bs.Free()
	return bs.Materialize()
}

func seedMessage(f *testing.F, m proto.Message) {
	b, err := proto.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
}

// FuzzPeerItems: any bytes sent as a sluice.v1.Peer check (the unary
// Check, and each CheckStream message) either fail to decode, or decode to
// items that each convert to a limiter.Forwarded the bucket algorithms
// accept, or fail naming a field; never a panic. A converted item encodes
// back to one that converts to the same value.
func FuzzPeerItems(f *testing.F) {
	seedMessage(f, &sluicev1.PeerCheckRequest{From: "a", Hops: 1, Items: []*sluicev1.PeerItem{
		{Hash: 42, Cost: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 100, PeriodNs: int64(time.Minute), Burst: 200}},
		{Hash: 7, Cost: 0, UpTo: true, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_SLIDING_LOG, Limit: 10, PeriodNs: int64(time.Second)}},
		{Hash: 9, Cost: 1 << 40, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW_HITS, Limit: 0, PeriodNs: 1}},
	}})
	seedMessage(f, &sluicev1.PeerCheckRequest{Items: []*sluicev1.PeerItem{{Hash: 1, Cost: -1, Limit: &sluicev1.PeerLimit{Limit: -5, PeriodNs: -1}}, nil, {}}})
	// Grant returns and credits, good and bad.
	tok := &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 100, PeriodNs: int64(time.Minute)}
	seedMessage(f, &sluicev1.PeerCheckRequest{From: "c", Items: []*sluicev1.PeerItem{
		{Hash: 5, Cost: 15, ReturnGrant: 0xdeadbeef, Limit: tok},
		{Hash: 5, Cost: 15, Credit: true, Limit: tok},
		{Hash: 5, Cost: 101, Credit: true, Limit: tok},
		{Hash: 5, Cost: 1, Credit: true, ReturnGrant: 3, UpTo: true, Limit: tok},
		{Hash: 5, Cost: 1, ReturnGrant: 3, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 10, PeriodNs: 1}},
		// Fallback reports.
		{Hash: 6, Cost: 40, Report: true, Limit: tok},
		{Hash: 6, Cost: 4, Report: true, UpTo: true, Limit: tok},
		{Hash: 6, Cost: 1, Report: true, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, Limit: 4}},
	}})
	seedMessage(f, &sluicev1.PeerAcquireRequest{From: "b", Item: &sluicev1.PeerItem{Hash: 3, Cost: 2,
		Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, Limit: 4}}})
	f.Add([]byte{0x1a, 0x05, 0x08, 0xff, 0xff, 0xff, 0xff})
	// The sender's epoch (peer protocol 2): any value, and none.
	seedMessage(f, &sluicev1.PeerCheckRequest{From: "d", Epoch: 1, Items: []*sluicev1.PeerItem{{Hash: 8, Cost: 1, Limit: tok}}})
	seedMessage(f, &sluicev1.PeerCheckRequest{From: "d", Epoch: ^uint64(0), Hops: 1})
	f.Add([]byte{0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x28, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req sluicev1.PeerCheckRequest
		if decodeWire(data, &req) != nil {
			return
		}
		// The epoch reaches the limiter as sent (0: unknown, no mark),
		// and survives a re-encoding.
		if got := limiter.SenderEpoch(limiter.WithSenderEpoch(context.Background(), req.GetEpoch())); got != req.GetEpoch() {
			t.Fatalf("epoch %d reached the limiter as %d", req.GetEpoch(), got)
		}
		var again sluicev1.PeerCheckRequest
		if err := decodeWire(encodeWire(t, &sluicev1.PeerCheckRequest{Epoch: req.GetEpoch()}), &again); err != nil || again.GetEpoch() != req.GetEpoch() {
			t.Fatalf("epoch %d round trip: %d (%v)", req.GetEpoch(), again.GetEpoch(), err)
		}
		var zones bucket.Zones // one zone, one pointer: the round trip compares them
		for i, it := range req.GetItems() {
			var fw limiter.Forwarded
			if fe := fromPeerItem(&fw, it, &zones); fe != nil {
				if fe.Reason == "" {
					t.Fatalf("item %d: an error with no reason: %+v", i, fe)
				}
				continue
			}
			if err := fw.Limit.Validate(); err != nil {
				t.Fatalf("item %d: converted to an invalid limit %+v: %v", i, fw.Limit, err)
			}
			if fw.Cost < 0 || (fw.Cost > limiter.MaxCost && fw.Limit.Algorithm != bucket.FixedWindowHits) {
				t.Fatalf("item %d: cost %d accepted", i, fw.Cost)
			}
			if (fw.Return != 0 || fw.Credit) && (fw.Limit.Algorithm != bucket.TokenBucket || fw.Cost > fw.Limit.Capacity() || fw.UpTo || (fw.Return != 0 && fw.Credit)) {
				t.Fatalf("item %d: a return or credit accepted: %+v", i, fw)
			}
			if fw.Report && (fw.UpTo || fw.Credit || fw.Return != 0 || fw.Limit.Algorithm == bucket.Concurrency) {
				t.Fatalf("item %d: a bad report accepted: %+v", i, fw)
			}
			// Round trip: what this node would forward is what it accepted.
			out := toPeerItem(&sluicev1.PeerItem{}, &sluicev1.PeerLimit{}, &fw)
			var back sluicev1.PeerItem
			if err := decodeWire(encodeWire(t, out), &back); err != nil {
				t.Fatalf("item %d: re-encoded item does not decode: %v", i, err)
			}
			var fw2 limiter.Forwarded
			if fe := fromPeerItem(&fw2, &back, &zones); fe != nil || fw2 != fw {
				t.Fatalf("item %d: round trip %+v -> %+v (%v)", i, fw, fw2, fe)
			}
		}
	})
}

// FuzzKeyStates: any bytes sent as a Handoff (or answered to a Fetch)
// either fail to decode, or each state converts to a store.Entry or fails
// naming a field; never a panic. A converted state encodes back to the
// same entry.
func FuzzKeyStates(f *testing.F) {
	seedMessage(f, &sluicev1.HandoffRequest{From: "a", DonePartitions: []int32{0, 3}, States: []*sluicev1.KeyState{
		{Hash: 1, Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, PeriodNs: int64(time.Minute), Tat: 1e18},
		{Hash: 2, Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, WindowStart: 1, WindowExpires: 2, WindowPrev: 3, WindowCur: 4},
		{Hash: 3, Algorithm: sluicev1.Algorithm_ALGORITHM_SLIDING_LOG, PeriodNs: 10, LogAt: []int64{1, 2}, LogCost: []int64{1, 1}},
		{Hash: 4, Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, LeaseId: []uint64{9}, LeaseCost: []int64{1}, LeaseExpires: []int64{5}},
		{Hash: 10, Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Reservations: []*sluicev1.PeerReservation{
			{Id: 1, Tag: 2, Estimate: 100, Expires: 1e18}, {Id: 3, Tag: 4, Holder: 5, Estimate: 7, Window: 60, Expires: 9, Settled: true, Actual: 9, Charged: 2}}},
		// A token bucket's debt record (bucket.TokenDebt.Record).
		{Hash: 11, Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Tat: 1e18, Reservations: []*sluicev1.PeerReservation{
			{Id: bucket.DebtID, Tag: bucket.DebtTag, Estimate: 10, Window: 1e9, Expires: 1e18 + 1e10, Settled: true}}},
	}})
	seedMessage(f, &sluicev1.FetchResponse{States: []*sluicev1.KeyState{
		{Hash: 5, Algorithm: sluicev1.Algorithm_ALGORITHM_SLIDING_LOG, LogAt: []int64{1}},
		{Hash: 6, Algorithm: sluicev1.Algorithm(99)},
		{Hash: 7, Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, LeaseId: []uint64{1, 2}, LeaseCost: []int64{1}},
		{Hash: 8, Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, LeaseId: []uint64{9}, LeaseCost: []int64{1}, LeaseExpires: []int64{5}, LeaseTag: []uint64{3}, LeaseHolder: []uint64{4}},
		{Hash: 9, Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, LeaseId: []uint64{9}, LeaseCost: []int64{1}, LeaseExpires: []int64{5}, LeaseHolder: []uint64{4, 5}},
	}})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req sluicev1.HandoffRequest
		if decodeWire(data, &req) != nil {
			return
		}
		for i, ks := range req.GetStates() {
			var e store.Entry
			if fe := fromKeyState(&e, ks); fe != nil {
				if fe.Reason == "" {
					t.Fatalf("state %d: an error with no reason: %+v", i, fe)
				}
				continue
			}
			if e.Algorithm < bucket.TokenBucket || e.Algorithm > bucket.LastAlgorithm {
				t.Fatalf("state %d: algorithm %d accepted", i, e.Algorithm)
			}
			if e.Algorithm == bucket.SlidingLog && e.Period <= 0 {
				t.Fatalf("state %d: a sliding log with period %d accepted", i, e.Period)
			}
			var back sluicev1.KeyState
			if err := decodeWire(encodeWire(t, toKeyState(&sluicev1.KeyState{}, &e)), &back); err != nil {
				t.Fatalf("state %d: re-encoded state does not decode: %v", i, err)
			}
			var e2 store.Entry
			if fe := fromKeyState(&e2, &back); fe != nil || !reflect.DeepEqual(e, e2) {
				t.Fatalf("state %d: round trip %+v -> %+v (%v)", i, e, e2, fe)
			}
		}
	})
}

// FuzzPeerResults: any bytes a peer answers a check with decode to
// answers, an item's error staying an error; never a panic.
func FuzzPeerResults(f *testing.F) {
	seedMessage(f, &sluicev1.PeerCheckResponse{Owner: "b", Results: []*sluicev1.PeerResult{
		{Allowed: true, Limit: 10, Remaining: 9, ResetAfterNs: 100},
		{ErrorCode: 8, ErrorMessage: "store: full"},
		{ErrorCode: 3, ErrorMessage: "limit: must be > 0", RetryAfterNs: -1},
		{Allowed: true, Granted: 25, GrantId: 0xfeed, Issuer: "a"},
		nil,
	}})
	f.Fuzz(func(t *testing.T, data []byte) {
		var resp sluicev1.PeerCheckResponse
		if decodeWire(data, &resp) != nil {
			return
		}
		for i, r := range resp.GetResults() {
			var a limiter.Answer
			fromPeerResult(&a, r)
			if (r == nil || r.GetErrorCode() != 0) && a.Err == nil {
				t.Fatalf("result %d: %+v decoded without its error", i, r)
			}
			if a.Err != nil && a.Allowed {
				t.Fatalf("result %d: an error that allows: %+v", i, a)
			}
		}
	})
}
