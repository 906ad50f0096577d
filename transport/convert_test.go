package transport

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/store"
)

// sampleEntries has a state of every algorithm, including empty and
// multi-entry logs and lease sets.
func sampleEntries(base int64) []store.Entry {
	return []store.Entry{
		{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: base + 5e9}},
		{Key: 2, Algorithm: bucket.FixedWindow, Window: bucket.WindowState{Start: base, Expires: base + 60e9, Cur: 7}},
		{Key: 3, Algorithm: bucket.SlidingWindow, Window: bucket.WindowState{Start: base, Expires: base + 120e9, Prev: 4, Cur: 9}},
		{Key: 4, Algorithm: bucket.SlidingLog, Period: int64(time.Minute), Log: bucket.LogState{Entries: []bucket.LogEntry{
			{At: base - 2e9, Cost: 1}, {At: base - 1e9, Cost: 3}, {At: base, Cost: 2}}}},
		{Key: 5, Algorithm: bucket.Concurrency, Leases: bucket.LeaseState{Leases: []bucket.Lease{
			{ID: 11, Cost: 1, Expires: base + 30e9}, {ID: 12, Tag: 98, Holder: 1<<64 - 2, Cost: 2, Expires: base + 60e9}}}},
		{Key: 6, Algorithm: bucket.SlidingLog, Period: 1, Log: bucket.LogState{}},
		{Key: 7, Algorithm: bucket.Concurrency},
		{Key: 8, Algorithm: bucket.FixedWindowHits, Window: bucket.WindowState{Start: base, Expires: base + 1e9, Cur: 1 << 40}},
		{Key: 1<<64 - 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: -3}},
	}
}

func TestPeerConvertKeyStateRoundTrip(t *testing.T) {
	for _, e := range sampleEntries(time.Now().UnixNano()) {
		t.Run(fmt.Sprintf("%v/%d", e.Algorithm, e.Key), func(t *testing.T) {
			var ks sluicev1.KeyState
			toKeyState(&ks, &e)
			// Through the wire format too.
			b, err := proto.Marshal(&ks)
			if err != nil {
				t.Fatal(err)
			}
			var wire sluicev1.KeyState
			if err := proto.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			var got store.Entry
			if fe := fromKeyState(&got, &wire); fe != nil {
				t.Fatalf("fromKeyState: %s: %s", fe.Field, fe.Reason)
			}
			if !reflect.DeepEqual(got, e) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, e)
			}
		})
	}
}

func TestPeerConvertItemRoundTrip(t *testing.T) {
	berlin, err := bucket.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	items := []limiter.Forwarded{
		{Hash: 1, Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: time.Second, Burst: 20}, Cost: 3},
		{Hash: 2, Limit: bucket.Limit{Algorithm: bucket.SlidingWindow, Limit: 100, Period: time.Hour}, Cost: 0},
		{Hash: 3, Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 1, Period: time.Nanosecond}, Cost: 1},
		{Hash: 4, Limit: bucket.Limit{Algorithm: bucket.SlidingLog, Limit: bucket.MaxSlidingLogLimit, Period: bucket.MaxPeriod}, Cost: 5},
		{Hash: 1<<64 - 1, Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: bucket.MaxLimit}, Cost: bucket.MaxLimit},
		{Hash: 5, Limit: bucket.Limit{Algorithm: bucket.FixedWindowHits, Limit: 0, Period: time.Second}, Cost: 7},
		{Hash: 6, Limit: bucket.Limit{Algorithm: bucket.FixedWindowHits, Limit: bucket.MaxHitsLimit, Period: 365 * 24 * time.Hour}, Cost: 1 << 40},
		{Hash: 7, Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: time.Second, Burst: 20}, Cost: 20, Return: 0xfeed},
		{Hash: 8, Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: time.Second}, Cost: 4, Credit: true},
		{Hash: 9, Limit: bucket.Limit{Algorithm: bucket.SlidingWindow, Limit: 10, Period: time.Second}, Cost: 30, Report: true},
		{Hash: 10, Limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 1, Period: bucket.MaxPeriod}, Cost: 1, Inline: true, Client: 0xc11e47},
		{Hash: 11, Limit: bucket.Limit{Algorithm: bucket.FixedWindow, Limit: 10, Calendar: bucket.Day}, Cost: 1},
		{Hash: 12, Limit: bucket.Limit{Algorithm: bucket.FixedWindowHits, Limit: 10, Calendar: bucket.Month, Zone: berlin}, Cost: 1},
	}
	for _, f := range items {
		var it sluicev1.PeerItem
		var lim sluicev1.PeerLimit
		toPeerItem(&it, &lim, &f)
		var got limiter.Forwarded
		if fe := fromPeerItem(&got, &it, nil); fe != nil {
			t.Fatalf("%+v: %s: %s", f, fe.Field, fe.Reason)
		}
		if f.Limit.Calendar != bucket.NoCalendar && f.Limit.Zone == nil {
			f.Limit.Zone = time.UTC // sent as "UTC"
		}
		if got.Limit.Zone.String() != f.Limit.Zone.String() {
			t.Errorf("round trip: zone %v, want %v", got.Limit.Zone, f.Limit.Zone)
		}
		got.Limit.Zone = f.Limit.Zone // two loads of a zone are two pointers
		if got != f {
			t.Errorf("round trip: got %+v, want %+v", got, f)
		}
	}
}

// Grant returns and credits take a token bucket, a cost within its
// capacity, and exclude each other and up_to; a fallback report is a
// plain count of a rate limit.
func TestPeerConvertReturnBadInput(t *testing.T) {
	tok := &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 10, PeriodNs: int64(time.Second)}
	for _, tc := range []struct {
		it    *sluicev1.PeerItem
		field string
	}{
		{&sluicev1.PeerItem{Hash: 1, Cost: 11, ReturnGrant: 9, Limit: tok}, "cost"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 11, Credit: true, Limit: tok}, "cost"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, ReturnGrant: 9, UpTo: true, Limit: tok}, "return_grant"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, ReturnGrant: 9, Credit: true, Limit: tok}, "return_grant"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Credit: true, UpTo: true, Limit: tok}, "credit"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Credit: true, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 10, PeriodNs: 1}}, "credit"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Report: true, UpTo: true, Limit: tok}, "report"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Report: true, Credit: true, Limit: tok}, "report"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Report: true, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, Limit: 4}}, "report"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 4, Calendar: 9}}, "limit.calendar"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 4, Calendar: 1, Timezone: "Mars/Base"}}, "limit.timezone"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 4, PeriodNs: 1, Timezone: "UTC"}}, "limit.timezone"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, Limit: 4, PeriodNs: 1, Calendar: 1}}, "limit.period_ns"},
		{&sluicev1.PeerItem{Hash: 1, Cost: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_SLIDING_WINDOW, Limit: 4, Calendar: 1}}, "limit.calendar"},
	} {
		var got limiter.Forwarded
		if fe := fromPeerItem(&got, tc.it, nil); fe == nil || fe.Field != tc.field || fe.Reason == "" {
			t.Errorf("%v: %+v, want an error on %s", tc.it, fe, tc.field)
		}
	}
}

func TestPeerConvertAnswerErrors(t *testing.T) {
	res := bucket.Result{Allowed: true, Limit: 10, Remaining: 4, ResetAfter: 3 * time.Second, RetryAfter: 0}
	cases := []struct {
		name string
		err  error
		code codes.Code
		is   error
	}{
		{"ok", nil, codes.OK, nil},
		{"full", fmt.Errorf("%w: new key refused", store.ErrFull), codes.ResourceExhausted, store.ErrFull},
		{"cost", fmt.Errorf("cost: %w", bucket.ErrCostExceedsCapacity), codes.InvalidArgument, nil},
		{"invalid", fmt.Errorf("item 0: cost: %w", limiter.ErrInvalid), codes.InvalidArgument, nil},
		{"wrong algorithm", fmt.Errorf("%w: Take on concurrency", store.ErrWrongAlgorithm), codes.InvalidArgument, nil},
		{"second hop", fmt.Errorf("%w: n3", limiter.ErrPeerUnavailable), codes.Unavailable, nil},
		{"status", status.Error(codes.FailedPrecondition, "moved"), codes.FailedPrecondition, nil},
		{"state elsewhere", limiter.ErrStateElsewhere, codes.FailedPrecondition, limiter.ErrStateElsewhere},
		{"deadline at the owner", context.DeadlineExceeded, codes.DeadlineExceeded, context.DeadlineExceeded},
		{"canceled at the owner", context.Canceled, codes.Canceled, context.Canceled},
		{"other", errors.New("boom"), codes.Internal, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := limiter.Answer{Result: res, Err: tc.err}
			if tc.err != nil {
				a.Allowed = false
			}
			var r sluicev1.PeerResult
			toPeerResult(&r, &a)
			var got limiter.Answer
			fromPeerResult(&got, &r)
			if got.Result != a.Result {
				t.Errorf("result = %+v, want %+v", got.Result, a.Result)
			}
			if tc.err == nil {
				if got.Err != nil {
					t.Errorf("err = %v, want nil", got.Err)
				}
				return
			}
			if c := status.Code(got.Err); c != tc.code {
				t.Errorf("code = %v, want %v", c, tc.code)
			}
			if tc.is != nil && !errors.Is(got.Err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", got.Err, tc.is)
			}
			if got.Err.Error() != tc.err.Error() && status.Convert(got.Err).Message() != tc.err.Error() {
				t.Errorf("message = %q, want %q", got.Err.Error(), tc.err.Error())
			}
		})
	}
}

// A lease_holder column of another length than lease_id is refused,
// naming the field; no column at all means no lease has a holder.
func TestPeerConvertLeaseHolderColumn(t *testing.T) {
	ks := &sluicev1.KeyState{Hash: 1, Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY,
		LeaseId: []uint64{1, 2}, LeaseCost: []int64{1, 1}, LeaseExpires: []int64{5, 5}, LeaseHolder: []uint64{7}}
	var e store.Entry
	if fe := fromKeyState(&e, ks); fe == nil || fe.Field != "lease_holder" {
		t.Fatalf("fromKeyState with 1 holder for 2 leases = %+v, want an error naming lease_holder", fe)
	}
	ks.LeaseHolder = nil
	if fe := fromKeyState(&e, ks); fe != nil || e.Leases.Leases[0].Holder != 0 || e.Leases.Leases[1].Holder != 0 {
		t.Fatalf("fromKeyState without holders = %+v, %+v", fe, e.Leases.Leases)
	}
	if back := toKeyState(&sluicev1.KeyState{}, &e); back.LeaseHolder != nil {
		t.Fatalf("holder-less leases encoded a lease_holder column %v", back.LeaseHolder)
	}
}
