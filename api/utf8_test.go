package api

import (
	"context"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Keys that are not valid UTF-8 are refused, naming the field, on every
// API: over HTTP, encoding/json would make "\xff" and "\xfe" (or an
// unpaired surrogate escape) one key "\uFFFD", so distinct byte keys
// shared one bucket. A key that spells U+FFFD itself is fine.
func TestHTTPKeysMustBeUTF8(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	for _, body := range []string{
		"{\"checks\":[{\"key\":\"a\xffb\",\"limit\":1,\"period\":\"1h\"}]}",
		`{"checks":[{"key":"a\udc80b","limit":1,"period":"1h"}]}`,
		`{"checks":[{"key":"ok","limit":1,"period":"1h"},{"key":"\ud800","limit":1,"period":"1h"}]}`,
	} {
		a := post(t, ts.Server, body)
		field := "checks[0].key"
		if len(body) > 70 {
			field = "checks[1].key"
		}
		wantBadRequest(t, a, field)
	}
	for _, body := range []string{
		"{\"checks\":[{\"key\":\"a\uFFFDb\",\"limit\":10,\"period\":\"1h\"}]}",
		`{"checks":[{"key":"a\uFFFDb","limit":10,"period":"1h"}]}`,
		`{"checks":[{"key":"a\ud83d\ude00b","limit":10,"period":"1h"}]}`,
	} {
		if a := post(t, ts.Server, body); a.status != 200 {
			t.Errorf("valid key %s: %s", body, a)
		}
	}
	wantBadRequest(t, do(t, ts.Server, "GET", "/v1/usage?key=a%FFb&limit=1&period=1h", ""), "key")
}

// Over gRPC, the vtprotobuf decoder does not check that a string field is
// valid UTF-8: the limiter does, per item, naming items[i].key.
func TestGRPCKeysMustBeUTF8(t *testing.T) {
	lim := newTestLimiter(t, "")
	_, conn := serveGRPC(t, GRPCConfig{Service: lim})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := sluicev1.NewRateLimiterClient(conn).Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{
		streamItem("fine", 5), streamItem("a\xffb", 5)}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || fieldOf(st) != "items[1].key" {
		t.Fatalf("Check of an invalid key: %v (field %q), want InvalidArgument naming items[1].key", err, fieldOf(st))
	}
	// On a stream, the item's own error names it (relative to the item).
	st, err := sluicev1.NewRateLimiterClient(conn).CheckStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&sluicev1.CheckStreamRequest{Id: 1, Items: []*sluicev1.CheckItem{streamItem("fine", 5), streamItem("a\xffb", 5)}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if e := resp.GetResults()[0].GetError(); e != nil {
		t.Fatalf("valid key: %v", e)
	}
	if e := resp.GetResults()[1].GetError(); e.GetCode() != int32(codes.InvalidArgument) || e.GetField() != "key" {
		t.Fatalf("invalid key on a stream: %+v, want InvalidArgument naming key", e)
	}
}

// The Envoy RLS refuses a domain or descriptor entry that is not valid
// UTF-8 with InvalidArgument naming it. (Over the wire protobuf-go's
// decoder already refuses such a request, with INTERNAL: the check is for
// a decoder that does not validate, like vtprotobuf's.)
func TestRLSEntriesMustBeUTF8(t *testing.T) {
	h := newRLSHarness(t, "domain: web\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n")
	for _, tc := range []struct {
		domain string
		d      *rlcommon.RateLimitDescriptor
		field  string
	}{
		{"web", &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "k", Value: "\xff"}}}, "descriptors[0].entries[0].value"},
		{"web", &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}, {Key: "\xfe", Value: "v"}}}, "descriptors[0].entries[1].key"},
		{"w\xffb", desc("k=v"), "domain"},
	} {
		_, err := h.s.ShouldRateLimit(context.Background(), request(tc.domain, 0, desc("k=ok"), tc.d))
		st := status.Convert(err)
		want := tc.field
		if want != "domain" {
			want = "descriptors[1]" + want[len("descriptors[0]"):]
		}
		if st.Code() != codes.InvalidArgument || fieldOf(st) != want {
			t.Errorf("%s: %v (field %q), want InvalidArgument naming %s", tc.field, err, fieldOf(st), want)
		}
	}
}

// More descriptors than limiter.MaxItems are refused before the pooled
// scratch grows to them.
func TestRLSDescriptorCountBounded(t *testing.T) {
	h := newRLSHarness(t, "")
	ds := make([]*rlcommon.RateLimitDescriptor, limiter.MaxItems+1)
	for i := range ds {
		ds[i] = desc("k=v")
	}
	_, err := h.s.ShouldRateLimit(context.Background(), request("web", 0, ds...))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || fieldOf(st) != "descriptors" {
		t.Fatalf("%d descriptors: %v, want InvalidArgument naming descriptors", len(ds), err)
	}
}
