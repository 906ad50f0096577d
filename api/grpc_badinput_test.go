package api

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// startGRPCClient serves the gRPC API of a real limiter on a loopback :0
// port and returns a client of it.
func startGRPCClient(t *testing.T) sluicev1.RateLimiterClient {
	t.Helper()
	lim := newTestLimiter(t, testPolicies)
	_, conn := serveGRPC(t, GRPCConfig{Service: lim})
	return sluicev1.NewRateLimiterClient(conn)
}

// lim is an inline limit of the given fields.
func lim(alg sluicev1.Algorithm, limit int64, period time.Duration, burst int64) *sluicev1.Limit {
	return &sluicev1.Limit{Algorithm: alg, Limit: limit, Period: durationpb.New(period), Burst: burst}
}

func withLimit(key string, l *sluicev1.Limit, cost *int64) *sluicev1.CheckItem {
	return &sluicev1.CheckItem{Key: key, Spec: &sluicev1.CheckItem_Limit{Limit: l}, Cost: cost}
}

func i64(v int64) *int64 { return &v }

// wantInvalid checks that err is InvalidArgument with a BadRequest detail
// naming field, and a message that starts with it.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || fieldOf(st) != field || !strings.HasPrefix(st.Message(), field+": ") {
		t.Errorf("%v (field %q), want InvalidArgument naming %q", err, fieldOf(st), field)
	}
}

// Every bound of a sluice.v1 call is an InvalidArgument naming the field:
// items per call, key length, cost, limit, burst and period (inline and by
// policy), lease TTL, grant size; never a panic, never a silent default.
// upTo makes it a grant request.
func upTo(it *sluicev1.CheckItem) *sluicev1.CheckItem {
	it.UpTo = true
	return it
}

func TestGRPCBadInput(t *testing.T) {
	c := startGRPCClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tb := sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	ok := lim(tb, 10, time.Minute, 0)
	long := strings.Repeat("k", limiter.MaxKeyBytes+1)
	many := make([]*sluicev1.CheckItem, limiter.MaxItems+1)
	for i := range many {
		many[i] = withLimit("k", ok, nil)
	}
	checks := []struct {
		name  string
		items []*sluicev1.CheckItem
		field string
	}{
		{"too many items", many, "items"},
		{"no items", nil, "items"},
		{"empty key", []*sluicev1.CheckItem{withLimit("", ok, nil)}, "items[0].key"},
		{"key too long", []*sluicev1.CheckItem{withLimit(long, ok, nil)}, "items[0].key"},
		{"negative cost", []*sluicev1.CheckItem{withLimit("k", ok, i64(-1))}, "items[0].cost"},
		{"cost above the capacity", []*sluicev1.CheckItem{withLimit("k", ok, i64(11))}, "items[0].cost"},
		{"cost above MaxCost", []*sluicev1.CheckItem{withLimit("k", lim(tb, bucket.MaxLimit, time.Hour, 0), i64(limiter.MaxCost+1))}, "items[0].cost"},
		{"policy cost above the capacity", []*sluicev1.CheckItem{{Key: "k", Spec: &sluicev1.CheckItem_Policy{Policy: "login"}, Cost: i64(3)}}, "items[0].cost"},
		{"zero limit", []*sluicev1.CheckItem{withLimit("k", lim(tb, 0, time.Minute, 0), nil)}, "items[0].limit.limit"},
		{"limit above MaxLimit", []*sluicev1.CheckItem{withLimit("k", lim(tb, bucket.MaxLimit+1, time.Minute, 0), nil)}, "items[0].limit.limit"},
		{"sliding log limit", []*sluicev1.CheckItem{withLimit("k", lim(sluicev1.Algorithm_ALGORITHM_SLIDING_LOG, bucket.MaxSlidingLogLimit+1, time.Minute, 0), nil)}, "items[0].limit.limit"},
		{"burst above MaxLimit", []*sluicev1.CheckItem{withLimit("k", lim(tb, 10, time.Minute, bucket.MaxLimit+1), nil)}, "items[0].limit.burst"},
		{"negative burst", []*sluicev1.CheckItem{withLimit("k", lim(tb, 10, time.Minute, -1), nil)}, "items[0].limit.burst"},
		{"burst of a window", []*sluicev1.CheckItem{withLimit("k", lim(sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, 10, time.Minute, 5), nil)}, "items[0].limit.burst"},
		{"no period", []*sluicev1.CheckItem{withLimit("k", &sluicev1.Limit{Limit: 10}, nil)}, "items[0].limit.period"},
		{"negative period", []*sluicev1.CheckItem{withLimit("k", lim(tb, 10, -time.Second, 0), nil)}, "items[0].limit.period"},
		{"period above MaxPeriod", []*sluicev1.CheckItem{withLimit("k", lim(tb, 10, bucket.MaxPeriod+time.Second, 0), nil)}, "items[0].limit.period"},
		{"invalid duration", []*sluicev1.CheckItem{withLimit("k", &sluicev1.Limit{Limit: 10, Period: &durationpb.Duration{Seconds: 1, Nanos: -1}}, nil)}, "items[0].limit.period"},
		{"unknown algorithm", []*sluicev1.CheckItem{withLimit("k", lim(sluicev1.Algorithm(99), 10, time.Minute, 0), nil)}, "items[0].limit.algorithm"},
		{"unknown failure mode", []*sluicev1.CheckItem{withLimit("k", &sluicev1.Limit{Limit: 10, Period: durationpb.New(time.Minute), FailureMode: 9}, nil)}, "items[0].limit.failure_mode"},
		{"neither limit nor policy", []*sluicev1.CheckItem{{Key: "k"}}, "items[0].limit"},
		{"unknown policy", []*sluicev1.CheckItem{{Key: "k", Spec: &sluicev1.CheckItem_Policy{Policy: "nope"}}}, "items[0].policy"},
		{"second item", []*sluicev1.CheckItem{withLimit("k", ok, nil), withLimit("k", lim(tb, -1, time.Minute, 0), nil)}, "items[1].limit.limit"},
		{"up_to of a window", []*sluicev1.CheckItem{upTo(withLimit("k", lim(sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, 10, time.Minute, 0), i64(2)))}, "items[0].up_to"},
		{"up_to of no units", []*sluicev1.CheckItem{upTo(withLimit("k", ok, i64(0)))}, "items[0].cost"},
		{"up_to above the capacity", []*sluicev1.CheckItem{withLimit("k", ok, nil), upTo(withLimit("k", ok, i64(11)))}, "items[1].cost"},
	}
	for _, tc := range checks {
		t.Run("Check/"+tc.name, func(t *testing.T) {
			_, err := c.Check(ctx, &sluicev1.CheckRequest{Items: tc.items})
			wantInvalid(t, err, tc.field)
		})
	}
	t.Run("CheckStream/too many items", func(t *testing.T) {
		st, err := c.CheckStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = st.CloseSend() }()
		if err := st.Send(&sluicev1.CheckStreamRequest{Id: 1, Items: many}); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil || len(resp.GetResults()) != len(many) {
			t.Fatalf("%d results, %v; want %d", len(resp.GetResults()), err, len(many))
		}
		if e := resp.GetResults()[0].GetError(); codes.Code(e.GetCode()) != codes.InvalidArgument || e.GetField() != "items" {
			t.Fatalf("result error %+v, want INVALID_ARGUMENT naming items", e)
		}
	})
	conc := lim(sluicev1.Algorithm_ALGORITHM_CONCURRENCY, 4, 0, 0)
	t.Run("Acquire/ttl above MaxLeaseTTL", func(t *testing.T) {
		_, err := c.Acquire(ctx, &sluicev1.AcquireRequest{Key: "k", Spec: &sluicev1.AcquireRequest_Limit{Limit: conc}, Ttl: durationpb.New(limiter.MaxLeaseTTL + time.Second)})
		wantInvalid(t, err, "ttl")
	})
	t.Run("Acquire/ttl above the node's max lease TTL", func(t *testing.T) {
		_, err := c.Acquire(ctx, &sluicev1.AcquireRequest{Key: "k", Spec: &sluicev1.AcquireRequest_Limit{Limit: conc}, Ttl: durationpb.New(limiter.DefaultMaxLeaseTTL + time.Second)})
		wantInvalid(t, err, "ttl")
	})
	t.Run("Acquire/key too long", func(t *testing.T) {
		_, err := c.Acquire(ctx, &sluicev1.AcquireRequest{Key: long, Spec: &sluicev1.AcquireRequest_Limit{Limit: conc}})
		wantInvalid(t, err, "key")
	})
	t.Run("Acquire/cost above the limit", func(t *testing.T) {
		_, err := c.Acquire(ctx, &sluicev1.AcquireRequest{Key: "k", Spec: &sluicev1.AcquireRequest_Limit{Limit: conc}, Cost: i64(5)})
		wantInvalid(t, err, "cost")
	})
	t.Run("Acquire/limit above MaxLimit", func(t *testing.T) {
		_, err := c.Acquire(ctx, &sluicev1.AcquireRequest{Key: "k", Spec: &sluicev1.AcquireRequest_Limit{Limit: lim(sluicev1.Algorithm_ALGORITHM_CONCURRENCY, bucket.MaxLimit+1, 0, 0)}})
		wantInvalid(t, err, "limit.limit")
	})
	t.Run("Release/key too long", func(t *testing.T) {
		_, err := c.Release(ctx, &sluicev1.ReleaseRequest{Key: long, Spec: &sluicev1.ReleaseRequest_Limit{Limit: conc}, LeaseId: "1"})
		wantInvalid(t, err, "key")
	})
	// Errors quote at most a short prefix of an input (policy.Echo).
	huge := strings.Repeat("n", 3<<20)
	short := func(t *testing.T, err error, field string) {
		t.Helper()
		wantInvalid(t, err, field)
		if n := len(status.Convert(err).Message()); n > 200 {
			t.Errorf("a %d-byte error message quotes too much of the input", n)
		}
	}
	t.Run("Check/3 MiB policy name", func(t *testing.T) {
		_, err := c.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{Key: "k", Spec: &sluicev1.CheckItem_Policy{Policy: huge}}}})
		short(t, err, "items[0].policy")
	})
	t.Run("Check/unknown policy of the longest name", func(t *testing.T) {
		_, err := c.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{Key: "k", Spec: &sluicev1.CheckItem_Policy{Policy: huge[:policy.MaxNameLen]}}}})
		short(t, err, "items[0].policy")
	})
	t.Run("Release/3 MiB lease id", func(t *testing.T) {
		_, err := c.Release(ctx, &sluicev1.ReleaseRequest{Key: "k", Spec: &sluicev1.ReleaseRequest_Limit{Limit: conc}, LeaseId: huge})
		short(t, err, "lease_id")
	})
	t.Run("Grant/want above the capacity", func(t *testing.T) {
		_, err := c.Grant(ctx, &sluicev1.GrantRequest{Key: "k", Spec: &sluicev1.GrantRequest_Limit{Limit: ok}, Want: 11})
		wantInvalid(t, err, "want")
	})
	t.Run("Grant/want zero", func(t *testing.T) {
		_, err := c.Grant(ctx, &sluicev1.GrantRequest{Key: "k", Spec: &sluicev1.GrantRequest_Limit{Limit: ok}})
		wantInvalid(t, err, "want")
	})
	t.Run("Grant/period above MaxPeriod", func(t *testing.T) {
		_, err := c.Grant(ctx, &sluicev1.GrantRequest{Key: "k", Spec: &sluicev1.GrantRequest_Limit{Limit: lim(tb, 10, bucket.MaxPeriod+time.Second, 0)}, Want: 1})
		wantInvalid(t, err, "limit.period")
	})
	t.Run("Grant/return above the capacity", func(t *testing.T) {
		_, err := c.Grant(ctx, &sluicev1.GrantRequest{Key: "k", Spec: &sluicev1.GrantRequest_Limit{Limit: ok}, Want: 11, ReturnGrant: 7, Issuer: "n"})
		wantInvalid(t, err, "want")
	})
	t.Run("Grant/return without an issuer", func(t *testing.T) {
		_, err := c.Grant(ctx, &sluicev1.GrantRequest{Key: "k", Spec: &sluicev1.GrantRequest_Limit{Limit: ok}, Want: 1, ReturnGrant: 7})
		wantInvalid(t, err, "issuer")
	})
	t.Run("Grant/return without a grant id", func(t *testing.T) {
		_, err := c.Grant(ctx, &sluicev1.GrantRequest{Key: "k", Spec: &sluicev1.GrantRequest_Limit{Limit: ok}, Want: 1, Issuer: "n"})
		wantInvalid(t, err, "return_grant")
	})
	// Nothing above consumed anything: a valid check sees a full bucket.
	resp, err := c.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{withLimit("k", ok, i64(0))}})
	if err != nil || resp.GetResults()[0].GetRemaining() != 10 {
		t.Fatalf("after the bad calls: %v, %v; want 10 remaining", resp, err)
	}
}
