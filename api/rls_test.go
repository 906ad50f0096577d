package api

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/rls"
)

// rlsConfig is the configuration of the service's semantics tests.
const rlsConfig = `
domain: web
descriptors:
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 5, name: per-path}
  - key: path
    value: /login
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: path
    value: /health            # whitelisted
  - key: user
    value: vip
    rate_limit: {unlimited: true}
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 3
      replaces: [{name: per-path}]
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: zero
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: tenant
    descriptors:
      - key: ip
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 10}
`

// rlsHarness is the service over a real limiter, on a fake clock that
// starts 10.5 s into a minute.
type rlsHarness struct {
	t   *testing.T
	s   *RLS
	clk *limitertest.Clock
	reg *prometheus.Registry
}

var rlsEpoch = time.Date(2026, 3, 1, 12, 0, 10, 500e6, time.UTC)

func newRLSHarness(t *testing.T, yaml string, opts ...func(*RLSConfig)) *rlsHarness {
	t.Helper()
	clk := limitertest.NewClock(rlsEpoch)
	lim, err := limiter.New(limiter.Config{NodeName: "n0", Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	reg := prometheus.NewRegistry()
	cfg := RLSConfig{Checker: lim, Clock: clk.Now, Registerer: reg, MaxMetricKeys: 3}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := NewRLS(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if yaml != "" {
		c, err := rls.Parse([]rls.File{{Name: "web.yaml", Data: []byte(yaml)}}, rls.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.SetConfig(c)
	}
	return &rlsHarness{t: t, s: s, clk: clk, reg: reg}
}

// desc builds a descriptor from "k=v,k=v".
func desc(kvs string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for kv := range strings.SplitSeq(kvs, ",") {
		k, v, _ := strings.Cut(kv, "=")
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	return d
}

// withHits sets a descriptor's own hits_addend.
func withHits(d *rlcommon.RateLimitDescriptor, h uint64) *rlcommon.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(h)
	return d
}

func request(domain string, hits uint32, ds ...*rlcommon.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits}
}

// limit is a current_limit.
func limit(rpu uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, name string) *rlsv3.RateLimitResponse_RateLimit {
	return &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: rpu, Unit: unit, Name: name}
}

const (
	ok     = rlsv3.RateLimitResponse_OK
	over   = rlsv3.RateLimitResponse_OVER_LIMIT
	sec    = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	day    = rlsv3.RateLimitResponse_RateLimit_DAY
)

// fieldOf is the field a BadRequest detail names.
func fieldOf(st *status.Status) string {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

// status is a descriptor status; reset < 0 means none.
func status_(code rlsv3.RateLimitResponse_Code, l *rlsv3.RateLimitResponse_RateLimit, remaining uint32, reset int64) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: l, LimitRemaining: remaining}
	if reset >= 0 {
		st.DurationUntilReset = &durationpb.Duration{Seconds: reset}
	}
	return st
}

// noLimit is the status of a descriptor without a rule.
var noLimit = status_(ok, nil, 0, -1)

func (h *rlsHarness) expect(step int, req *rlsv3.RateLimitRequest, overall rlsv3.RateLimitResponse_Code, sts ...*rlsv3.RateLimitResponse_DescriptorStatus) {
	h.t.Helper()
	resp, err := h.s.ShouldRateLimit(context.Background(), req)
	if err != nil {
		h.t.Fatalf("step %d: %v", step, err)
	}
	want := &rlsv3.RateLimitResponse{OverallCode: overall, Statuses: sts}
	if !proto.Equal(resp, want) {
		h.t.Errorf("step %d: %v\n got %v\nwant %v", step, req, resp, want)
	}
}

// TestRLSSemantics: each point of the reference's answers, a case each,
// in steps on one clock (t0 is 10.5 s into a minute, so a minute limit
// resets in 50 s, an hour one in 3590 s).
func TestRLSSemantics(t *testing.T) {
	tests := []struct {
		name string
		run  func(h *rlsHarness)
	}{
		{"fixed window aligned to the clock; hits over the limit still count", func(h *rlsHarness) {
			for i := range uint32(5) {
				h.expect(int(i), request("web", 0, desc("path=/a")), ok, status_(ok, limit(5, minute, "per-path"), 4-i, 50))
			}
			h.expect(5, request("web", 0, desc("path=/a")), over, status_(over, limit(5, minute, "per-path"), 0, 50))
			h.clk.Advance(49 * time.Second) // 59.5 s: still this window
			h.expect(6, request("web", 0, desc("path=/a")), over, status_(over, limit(5, minute, "per-path"), 0, 1))
			h.clk.Advance(time.Second) // 00.5 s of the next minute
			h.expect(7, request("web", 0, desc("path=/a")), ok, status_(ok, limit(5, minute, "per-path"), 4, 60))
		}},
		{"overall OVER_LIMIT when any descriptor is", func(h *rlsHarness) {
			h.expect(0, request("web", 2, desc("path=/login"), desc("path=/b")), ok,
				status_(ok, limit(2, minute, ""), 0, 50), status_(ok, limit(5, minute, "per-path"), 3, 50))
			h.expect(1, request("web", 0, desc("path=/b"), desc("path=/login")), over,
				status_(ok, limit(5, minute, "per-path"), 2, 50), status_(over, limit(2, minute, ""), 0, 50))
		}},
		{"request hits_addend, 0 meaning 1", func(h *rlsHarness) {
			h.expect(0, request("web", 3, desc("path=/a")), ok, status_(ok, limit(5, minute, "per-path"), 2, 50))
			h.expect(1, request("web", 0, desc("path=/a")), ok, status_(ok, limit(5, minute, "per-path"), 1, 50))
			h.expect(2, request("web", 3, desc("path=/a")), over, status_(over, limit(5, minute, "per-path"), 0, 50))
		}},
		{"descriptor hits_addend wins; 0 only reads", func(h *rlsHarness) {
			h.expect(0, request("web", 1, withHits(desc("path=/a"), 4), desc("path=/c")), ok,
				status_(ok, limit(5, minute, "per-path"), 1, 50), status_(ok, limit(5, minute, "per-path"), 4, 50))
			h.expect(1, request("web", 3, withHits(desc("path=/a"), 0)), ok, status_(ok, limit(5, minute, "per-path"), 1, 50))
			h.expect(2, request("web", 0, withHits(desc("path=/a"), 2)), over, status_(over, limit(5, minute, "per-path"), 0, 50))
			// Over the limit, a read is over too.
			h.expect(3, request("web", 0, withHits(desc("path=/a"), 0)), over, status_(over, limit(5, minute, "per-path"), 0, 50))
		}},
		{"hits above the limit are counted and over", func(h *rlsHarness) {
			h.expect(0, request("web", 100, desc("path=/a")), over, status_(over, limit(5, minute, "per-path"), 0, 50))
			h.expect(1, request("web", 0, withHits(desc("path=/a"), 0)), over, status_(over, limit(5, minute, "per-path"), 0, 50))
		}},
		{"descriptor limit override", func(h *rlsHarness) {
			d := desc("path=/a")
			d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
			h.expect(0, request("web", 0, d), ok, status_(ok, limit(1, hour, ""), 0, 3590))
			h.expect(1, request("web", 0, d), over, status_(over, limit(1, hour, ""), 0, 3590))
			// It applies to descriptors no rule matches, in a known domain only.
			n := desc("nothing=here")
			n.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit_DAY}
			h.expect(2, request("web", 0, n), ok, status_(ok, limit(7, day, ""), 6, 86400-12*3600-10))
			h.expect(3, request("other", 0, n), ok, noLimit)
			// The config's own counter for the same descriptor is another one
			// (another unit, so another window).
			h.expect(4, request("web", 0, desc("path=/a")), ok, status_(ok, limit(5, minute, "per-path"), 4, 50))
		}},
		{"whitelisted, unknown key, wrong depth", func(h *rlsHarness) {
			h.expect(0, request("web", 0, desc("path=/health"), desc("nope=x"), desc("path=/a,user=u")), ok, noLimit, noLimit, noLimit)
		}},
		{"unlimited", func(h *rlsHarness) {
			h.expect(0, request("web", 1000, desc("user=vip")), ok, status_(ok, nil, math.MaxUint32, -1))
		}},
		{"replaces", func(h *rlsHarness) {
			// user's rule replaces per-path: path=/a is not counted.
			h.expect(0, request("web", 0, desc("path=/a"), desc("user=u1")), ok, noLimit, status_(ok, limit(3, hour, ""), 2, 3590))
			h.expect(1, request("web", 0, desc("path=/a")), ok, status_(ok, limit(5, minute, "per-path"), 4, 50))
			// A rule without a name is not replaced; the unlimited one replaces nothing.
			h.expect(2, request("web", 0, desc("path=/login"), desc("user=u1")), ok,
				status_(ok, limit(2, minute, ""), 1, 50), status_(ok, limit(3, hour, ""), 1, 3590))
		}},
		{"shadow mode answers OK and still counts", func(h *rlsHarness) {
			h.expect(0, request("web", 0, desc("shadow=x")), ok, status_(ok, limit(1, sec, ""), 0, 1))
			h.expect(1, request("web", 0, desc("shadow=x")), ok, status_(ok, limit(1, sec, ""), 0, 1))
			if got := testutil.ToFloat64(h.s.metrics.shadowMode.WithLabelValues("web", "shadow")); got != 1 {
				h.t.Errorf("shadow_mode metric %v, want 1", got)
			}
		}},
		{"quota mode answers OK over the limit, without a reset", func(h *rlsHarness) {
			h.expect(0, request("web", 0, desc("quota=x")), ok, status_(ok, limit(1, sec, ""), 0, 1))
			h.expect(1, request("web", 0, desc("quota=x"), desc("path=/a")), ok,
				status_(ok, limit(1, sec, ""), 0, -1), status_(ok, limit(5, minute, "per-path"), 4, 50))
		}},
		{"a limit of 0 denies every hit", func(h *rlsHarness) {
			h.expect(0, request("web", 0, desc("zero=x")), over, status_(over, limit(0, day, ""), 0, 86400-12*3600-10))
		}},
		{"the same descriptor twice counts twice", func(h *rlsHarness) {
			h.expect(0, request("web", 0, desc("path=/login"), desc("path=/login"), desc("path=/login")), over,
				status_(ok, limit(2, minute, ""), 1, 50), status_(ok, limit(2, minute, ""), 0, 50), status_(over, limit(2, minute, ""), 0, 50))
		}},
		{"unknown domain is OK", func(h *rlsHarness) {
			h.expect(0, request("nowhere", 0, desc("path=/a"), desc("x=y")), ok, noLimit, noLimit)
		}},
		{"keys longer than the limiter's stay distinct", func(h *rlsHarness) {
			long := strings.Repeat("v", 2*limiter.MaxKeyBytes)
			h.expect(0, request("web", 5, desc("path="+long+"1")), ok, status_(ok, limit(5, minute, "per-path"), 0, 50))
			h.expect(1, request("web", 5, desc("path="+long+"2")), ok, status_(ok, limit(5, minute, "per-path"), 0, 50))
			h.expect(2, request("web", 0, desc("path="+long+"1")), over, status_(over, limit(5, minute, "per-path"), 0, 50))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(newRLSHarness(t, rlsConfig)) })
	}
}

// TestRLSBadRequests: an empty domain or descriptor list is the
// reference's error (Unknown, its message); so is a hits_addend beyond
// int64 (its Redis error, naming the cache key), which counts nothing
// while the request's other descriptors count; a limit override with no
// unit (the reference panics on it) is InvalidArgument. Each names its
// field in a BadRequest detail.
func TestRLSBadRequests(t *testing.T) {
	h := newRLSHarness(t, rlsConfig)
	noUnit := desc("path=/a")
	noUnit.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}
	manyDescs := make([]*rlcommon.RateLimitDescriptor, MaxDescriptors+1)
	for i := range manyDescs {
		manyDescs[i] = desc("path=/a")
	}
	window := strconv.FormatInt(rlsEpoch.Unix()/60*60, 10)
	for _, tt := range []struct {
		req   *rlsv3.RateLimitRequest
		code  codes.Code
		field string
		msg   string
	}{
		{request("", 0, desc("path=/a")), codes.Unknown, "domain", "rate limit domain must not be empty"},
		{request("", 0), codes.Unknown, "domain", "rate limit domain must not be empty"},
		{request("web", 0), codes.Unknown, "descriptors", "rate limit descriptor list must not be empty"},
		{request("web", 0, desc("path=/a"), noUnit), codes.InvalidArgument, "descriptors[1].limit.unit", "descriptors[1].limit.unit: unknown unit 0"},
		{request("web", 0, desc("path=/b"), withHits(desc("path=/a"), math.MaxUint64)), codes.Unknown, "descriptors[1].hits_addend",
			`command ["INCRBY" "web_path_/a_` + window + `" "-1"] in pipeline returned error: invalid character - at position 0 in parseUint`},
		{request("web", 0, withHits(desc("path=/a"), 1<<63)), codes.Unknown, "descriptors[0].hits_addend",
			`command ["INCRBY" "web_path_/a_` + window + `" "-9223372036854775808"] in pipeline returned error: invalid character - at position 0 in parseUint`},
		{request("web", 0, manyDescs...), codes.InvalidArgument, "descriptors", "descriptors: 1001 descriptors, at most 1000 per request"},
	} {
		_, err := h.s.ShouldRateLimit(context.Background(), tt.req)
		st := status.Convert(err)
		if st.Code() != tt.code || st.Message() != tt.msg || fieldOf(st) != tt.field {
			t.Errorf("%v: %v (field %q), want %v %q naming %s", tt.req, err, fieldOf(st), tt.code, tt.msg, tt.field)
		}
	}
	if got := testutil.ToFloat64(h.s.metrics.serviceError); got != 5 {
		t.Errorf("service_error = %v, want 5", got)
	}
	if got := testutil.ToFloat64(h.s.metrics.storeError); got != 2 {
		t.Errorf("store_error = %v, want 2", got)
	}
	// The overflowing hits counted nothing on /a; /b's hit counted.
	h.expect(0, request("web", 0, desc("path=/a")), ok, status_(ok, limit(5, minute, "per-path"), 4, 50))
	h.expect(0, request("web", 0, desc("path=/b")), ok, status_(ok, limit(5, minute, "per-path"), 3, 50))
}

// TestRLSMetrics: counters named and counted as the reference's; the
// per-value keys of detailed_metric are capped.
func TestRLSMetrics(t *testing.T) {
	h := newRLSHarness(t, rlsConfig)
	for range 6 {
		_, _ = h.s.ShouldRateLimit(context.Background(), request("web", 0, desc("path=/a")))
	}
	for i := range 5 {
		_, _ = h.s.ShouldRateLimit(context.Background(), request("web", 0, desc("tenant=t,ip=10.0.0."+string(rune('0'+i)))))
	}
	_, _ = h.s.ShouldRateLimit(context.Background(), request("nowhere", 0, desc("a=b")))
	m := h.s.metrics
	for _, tt := range []struct {
		c    prometheus.Counter
		want float64
	}{
		{m.totalHits.WithLabelValues("web", "path"), 6},
		{m.withinLimit.WithLabelValues("web", "path"), 5},
		{m.overLimit.WithLabelValues("web", "path"), 1},
		{m.nearLimit.WithLabelValues("web", "path"), 1}, // the 5th hit: above floor(5 × 0.8) = 4
		{m.totalHits.WithLabelValues("web", "tenant_t.ip_10.0.0.0"), 1},
		{m.totalHits.WithLabelValues("web", "tenant_t.ip_10.0.0.2"), 1},
		// Past the cap of 3 request-derived keys, counted under the rule's key.
		{m.totalHits.WithLabelValues("web", "tenant.ip"), 2},
		{m.notFound.WithLabelValues(otherDomain), 1},
		{m.folded, 3},
		{m.loadSuccess, 1},
	} {
		if got := testutil.ToFloat64(tt.c); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.c.Desc(), got, tt.want)
		}
	}
	n, err := testutil.GatherAndCount(h.reg, "ratelimit_service_rate_limit_total_hits")
	if err != nil || n != 5 { // path, 3 ip values, the rule's own key
		t.Errorf("total_hits series: %d %v, want 5", n, err)
	}
}

// TestRLSNoConfig: without a configuration every domain is unknown.
func TestRLSNoConfig(t *testing.T) {
	h := newRLSHarness(t, "")
	h.expect(0, request("web", 0, desc("path=/a")), ok, noLimit)
}
