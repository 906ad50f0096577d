package api

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// fuzzLimiter is a real limiter with a fake clock and the test policies,
// for fuzzing.
func fuzzLimiter(f *testing.F) *limiter.Limiter {
	set, err := policy.Parse([]byte(testPolicies))
	if err != nil {
		f.Fatal(err)
	}
	clk := limitertest.NewClock(time.Unix(1_699_999_980, 0))
	lim, err := limiter.New(limiter.Config{NodeName: "node-a", Clock: clk.Now, Policies: set})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(lim.Close)
	return lim
}

// fuzzServer is a sluice.v1 RateLimiter over fuzzLimiter, for fuzzing.
func fuzzServer(f *testing.F) *rateLimiterServer {
	return &rateLimiterServer{svc: fuzzLimiter(f), drain: context.Background(),
		obsCheck: nopObserver{}, obsAcquire: nopObserver{}, obsRelease: nopObserver{}, obsStream: nopObserver{}}
}

// decodeWire decodes data into m as the gRPC server does.
func decodeWire(data []byte, m proto.Message) error {
	return wire.Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, m)
}

type nopObserver struct{}

func (nopObserver) Observe(float64) {}

func seedProto(f *testing.F, m proto.Message) {
	b, err := proto.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
}

func inline(key string, limit int64, period time.Duration, cost *int64) *sluicev1.CheckItem {
	return &sluicev1.CheckItem{Key: key, Cost: cost,
		Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: limit, Period: durationpb.New(period)}}}
}

// FuzzGRPCCheck: any bytes sent as a sluice.v1 Check, decoded by the
// server's codec, are answered with one result per item or refused with
// InvalidArgument naming a field (a BadRequest detail); the same bytes as
// a CheckStream message get one result per item, an invalid item an
// INVALID_ARGUMENT result naming its field. Never a panic.
func FuzzGRPCCheck(f *testing.F) {
	one, zero, neg := int64(1), int64(0), int64(-1)
	seedProto(f, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{
		inline("user:42", 100, time.Minute, &one),
		{Key: "k", Spec: &sluicev1.CheckItem_Policy{Policy: "login"}},
		inline("k", 10, time.Hour, &zero),
	}})
	seedProto(f, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{inline("", -1, -time.Second, &neg), {Key: "x"}, nil}})
	seedProto(f, &sluicev1.CheckStreamRequest{Id: 7, Items: []*sluicev1.CheckItem{
		{Key: "k", Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Algorithm: sluicev1.Algorithm_ALGORITHM_SLIDING_LOG,
			Limit: 5, Period: &durationpb.Duration{Seconds: 1, Nanos: -1}, FailureMode: sluicev1.FailureMode(42)}}},
	}})
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		var req sluicev1.CheckRequest
		if decodeWire(data, &req) == nil {
			resp, err := s.Check(ctx, &req)
			if err != nil {
				st := status.Convert(err)
				if st.Code() != codes.InvalidArgument || fieldOf(st) == "" {
					t.Fatalf("Check: %v, want InvalidArgument naming a field", err)
				}
			} else if len(resp.GetResults()) != len(req.GetItems()) {
				t.Fatalf("Check: %d results for %d items", len(resp.GetResults()), len(req.GetItems()))
			}
		}
		r := s.request() // as CheckStream decodes
		defer s.releaseRequest(r)
		if decodeWire(data, r) != nil {
			return
		}
		sreq := &r.CheckStreamRequest
		resp := &s.checkBatch(ctx, "", sreq).msg
		if resp.GetId() != sreq.GetId() || len(resp.GetResults()) != len(sreq.GetItems()) {
			t.Fatalf("CheckStream: id %d, %d results for id %d, %d items", resp.GetId(), len(resp.GetResults()), sreq.GetId(), len(sreq.GetItems()))
		}
		for i, r := range resp.GetResults() {
			if e := r.GetError(); e != nil {
				if r.GetAllowed() || e.GetCode() == int32(codes.OK) || (e.GetCode() == int32(codes.InvalidArgument) && e.GetField() == "") {
					t.Fatalf("CheckStream item %d: %+v", i, r)
				}
			}
		}
	})
}
