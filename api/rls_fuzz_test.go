package api

import (
	"context"
	"testing"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzShouldRateLimit: any request on the wire is answered (one status
// per descriptor, OK or OVER_LIMIT) or refused with InvalidArgument naming
// a field; never a panic.
func FuzzShouldRateLimit(f *testing.F) {
	seed := func(r *rlsv3.RateLimitRequest) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(request("web", 3, desc("path=/a"), withHits(desc("tenant=t,ip=1"), 0)))
	over := desc("path=/login")
	over.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MONTH}
	seed(request("web", 0, over, desc("user=vip"), desc("user=u")))
	seed(request("", 0))
	seed(&rlsv3.RateLimitRequest{Domain: "web", Descriptors: []*rlcommon.RateLimitDescriptor{{HitsAddend: wrapperspb.UInt64(1 << 63)}}})
	h := newRLSHarness(&testing.T{}, rlsConfig)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rlsv3.RateLimitRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		resp, err := h.s.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			st := status.Convert(err)
			// InvalidArgument, or the reference's own errors (Unknown).
			if (st.Code() != codes.InvalidArgument && st.Code() != codes.Unknown) || fieldOf(st) == "" {
				t.Fatalf("error %v, want InvalidArgument or Unknown naming a field", err)
			}
			return
		}
		if len(resp.GetStatuses()) != len(req.GetDescriptors()) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.GetStatuses()), len(req.GetDescriptors()))
		}
		for i, st := range resp.GetStatuses() {
			if c := st.GetCode(); c != rlsv3.RateLimitResponse_OK && c != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("status %d: code %v", i, c)
			}
		}
	})
}
