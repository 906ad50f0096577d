package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/rls"
)

// The Envoy rate limit service, envoy.service.ratelimit.v3.RateLimitService
// (ShouldRateLimit), answering as envoyproxy/ratelimit answers with its
// configuration files (package rls owns them):
//
//   - each descriptor is matched to its rule (rls.Lookup), or takes the
//     descriptor's own limit override when its domain is known;
//   - descriptors with a rule become checks of a fixed_window_hits limit
//     (requests_per_unit per unit, the window aligned to the Unix epoch)
//     keyed by the reference's cache key without its time suffix, all of a
//     request in one limiter.Check, so that they are batched per owner
//     node and each counter is exact across the cluster;
//   - hits: the descriptor's hits_addend if set (0 counts nothing, reads),
//     else the request's, 0 meaning 1; every hit counts, over the limit too;
//   - a status per descriptor: OK or OVER_LIMIT with the rule as
//     current_limit, limit_remaining and duration_until_reset (whole
//     seconds to the end of the window); OK with no limit for a descriptor
//     without a rule, replaced by another's replaces, or of an unknown
//     domain; OK with limit_remaining 2^32-1 for an unlimited rule;
//     shadow_mode answers OK (and counts in the shadow_mode metric);
//     quota_mode answers OK with its remaining and no reset;
//   - overall_code is OVER_LIMIT when any descriptor is.
//
// An empty domain or an empty descriptor list is the reference's error:
// gRPC Unknown with its message (a plain Go error in the reference), with a
// BadRequest detail naming the field. So is a per-descriptor hits_addend
// above 2^63-1, which the reference's Redis INCRBY cannot take: Unknown
// with the reference's message, naming the counter's cache key; it counts
// nothing, and the request's other descriptors are counted, as the
// reference's pipeline counts them.

// DefaultNearLimitRatio is the reference's NEAR_LIMIT_RATIO: the share of
// a limit above which hits count as near_limit.
const DefaultNearLimitRatio = 0.8

// RLSServiceName is the gRPC service name, for health checks.
var RLSServiceName = rlsv3.RateLimitService_ServiceDesc.ServiceName

// RLSConfig configures the Envoy rate limit service.
type RLSConfig struct {
	// Checker decides the checks (the node's limiter). Required. It must
	// keep nothing of a request's Key after Check returns (the limiter
	// only hashes it): the keys are built in pooled memory.
	Checker Checker
	// Clock gives duration_until_reset; nil means time.Now. It must be the
	// limiter's clock, which places the windows.
	Clock func() time.Time
	// Registerer receives the service's metrics; nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
	// Metrics records call latency (transport "grpc", method
	// "ShouldRateLimit"); nil records nothing.
	Metrics *Metrics
	// MaxMetricKeys caps the metric series whose key comes from requests
	// (detailed_metric, value_to_metric, limit overrides, unknown
	// domains); past it they are counted under the rule's own key. 0 means
	// DefaultMaxMetricKeys.
	MaxMetricKeys int
	// NearLimitRatio is the share of a limit above which hits count as
	// near_limit (the reference's NEAR_LIMIT_RATIO); 0 means
	// DefaultNearLimitRatio. In (0, 1].
	NearLimitRatio float32
	// ShadowMode is the reference's global shadow mode (SHADOW_MODE): an
	// OVER_LIMIT overall_code is answered OK (the statuses keep their
	// codes) and counted in ratelimit_service_global_shadow_mode.
	ShadowMode bool
	// ResponseHeaders adds the reference's rate limit headers
	// (LIMIT_RESPONSE_HEADERS_ENABLED) to response_headers_to_add: the
	// limit, remaining and seconds to reset of the descriptor closest to
	// its limit (the last one over it, else the first with the least
	// remaining).
	ResponseHeaders bool
	// LimitHeader, RemainingHeader and ResetHeader name those headers
	// (LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER);
	// "" means the reference's defaults, DefaultLimitHeader and so on.
	LimitHeader, RemainingHeader, ResetHeader string
	// Logger receives configuration events; nil means slog.Default().
	Logger *slog.Logger
}

// RLS serves envoy.service.ratelimit.v3.RateLimitService.
type RLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	scratch sync.Pool // of *rlsScratch
	checker Checker
	clock   func() time.Time
	config  atomic.Pointer[rls.Config]
	metrics *rlsMetrics
	obs     prometheus.Observer
	near    float32
	shadow  bool
	headers *rlsHeaders // nil: none
	log     *slog.Logger
}

// NewRLS builds the service with an empty configuration (every domain
// unknown) until SetConfig.
func NewRLS(cfg RLSConfig) (*RLS, error) {
	switch {
	case cfg.Checker == nil:
		return nil, fmt.Errorf("%w: RLSConfig.Checker: is required", ErrInvalidConfig)
	case cfg.MaxMetricKeys < 0:
		return nil, fmt.Errorf("%w: RLSConfig.MaxMetricKeys: must be >= 0, got %d", ErrInvalidConfig, cfg.MaxMetricKeys)
	case cfg.NearLimitRatio < 0 || cfg.NearLimitRatio > 1:
		return nil, fmt.Errorf("%w: RLSConfig.NearLimitRatio: must be in (0, 1], got %v", ErrInvalidConfig, cfg.NearLimitRatio)
	}
	s := &RLS{checker: cfg.Checker, clock: cfg.Clock, near: cfg.NearLimitRatio, shadow: cfg.ShadowMode, log: cfg.Logger}
	if cfg.ResponseHeaders {
		s.headers = newRLSHeaders(cfg.LimitHeader, cfg.RemainingHeader, cfg.ResetHeader)
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if s.near == 0 {
		s.near = DefaultNearLimitRatio
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	m := cfg.Metrics
	if m == nil {
		var err error
		if m, err = NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	s.obs = m.observer("grpc", "ShouldRateLimit")
	var err error
	if s.metrics, err = newRLSMetrics(cfg.Registerer, cfg.MaxMetricKeys); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s.config.Store(rls.Empty())
	return s, nil
}

// Register registers the service, and Kuadrant's beside it (kuadrant.go),
// on srv and marks them SERVING on hs (if not nil).
func (s *RLS) Register(srv *grpc.Server, hs *health.Server) {
	rlsv3.RegisterRateLimitServiceServer(srv, s)
	srv.RegisterService(&kuadrantServiceDesc, kuadrant{s}) // beside it: kuadrant.go
	if hs != nil {
		hs.SetServingStatus(RLSServiceName, healthpb.HealthCheckResponse_SERVING)
		hs.SetServingStatus(KuadrantServiceName, healthpb.HealthCheckResponse_SERVING)
	}
}

// SetConfig swaps in a new configuration (counted as a load success);
// calls in flight finish with the old one. Counters are the limiter's,
// keyed by descriptor, so they carry over.
func (s *RLS) SetConfig(c *rls.Config) {
	s.config.Store(c)
	s.metrics.loadSuccess.Inc()
}

// ConfigRejected counts a configuration load that failed.
func (s *RLS) ConfigRejected(error) { s.metrics.loadError.Inc() }

// Config returns the configuration in force.
func (s *RLS) Config() *rls.Config { return s.config.Load() }

// descriptorCheck is one descriptor being answered.
type descriptorCheck struct {
	rule      *rls.Rule
	statsKey  string
	baseKey   string // the metric key when statsKey is over the cap
	key       string // the limiter key
	hits      int64
	overflow  uint64 // a hits_addend above math.MaxInt64, not counted
	counter   string // the counter key, in the call's scratch
	keyEnd    int    // where counter ends in rlsScratch.keys
	unlimited bool
	req       int // index in the checks, -1 for none
}

// maxPooledKeys bounds the key buffer a pooled scratch keeps.
const maxPooledKeys = 64 << 10

// rlsScratch is a call's scratch, pooled: the limiter keeps neither its
// requests nor its results after Check returns.
type rlsScratch struct {
	dcs  []descriptorCheck
	reqs []limiter.Request
	res  []limiter.Result
	keys []byte // the counter keys, end to end
}

// MaxDescriptors is the most descriptors one ShouldRateLimit request may
// carry (Envoy sends one per matching rate limit action, a handful), as
// many as the items of one Check.
const MaxDescriptors = limiter.MaxItems

// ShouldRateLimit answers one request from Envoy.
func (s *RLS) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	defer func() { s.obs.Observe(time.Since(start).Seconds()) }()
	domain, descs := req.GetDomain(), req.GetDescriptors()
	switch {
	case domain == "":
		s.metrics.serviceError.Inc()
		return nil, referenceError("domain", "rate limit domain must not be empty")
	case len(descs) == 0:
		s.metrics.serviceError.Inc()
		return nil, referenceError("descriptors", "rate limit descriptor list must not be empty")
	case len(descs) > MaxDescriptors:
		s.metrics.serviceError.Inc()
		return nil, wire.InvalidArgument("descriptors", fmt.Sprintf("%d descriptors, at most %d per request", len(descs), MaxDescriptors))
	}
	if err := validRLSText(domain, descs); err != nil {
		s.metrics.serviceError.Inc()
		return nil, err
	}
	cfg := s.config.Load()
	sc, _ := s.scratch.Get().(*rlsScratch)
	if sc == nil {
		sc = new(rlsScratch)
	}
	defer func() {
		clear(sc.dcs) // pin no keys or rules in the pool
		clear(sc.reqs[:cap(sc.reqs)])
		clear(sc.res[:cap(sc.res)])
		if cap(sc.keys) > maxPooledKeys {
			sc.keys = nil
		}
		s.scratch.Put(sc)
	}()
	if cap(sc.dcs) < len(descs) {
		sc.dcs = make([]descriptorCheck, len(descs))
	}
	dcs := sc.dcs[:len(descs)]
	sc.dcs = dcs
	if err := s.match(cfg, req, dcs, sc); err != nil {
		s.metrics.serviceError.Inc()
		return nil, err
	}
	reqs := sc.reqs[:0]
	for i := range dcs {
		dc := &dcs[i]
		if dc.rule == nil || dc.overflow != 0 {
			continue
		}
		dc.req = len(reqs)
		reqs = append(reqs, limiter.Request{
			Key:     dc.key,
			Limit:   bucket.Limit{Algorithm: bucket.FixedWindowHits, Limit: int64(dc.rule.RequestsPerUnit), Period: dc.rule.Unit.Period()},
			Cost:    dc.hits,
			Trusted: true,
		})
	}
	sc.reqs = reqs
	results, err := s.check(ctx, reqs, sc.res[:0])
	sc.res = results[:0]
	if err != nil {
		s.metrics.storeError.Inc()
		return nil, err
	}
	now := s.clock()
	if err := s.overflowError(domain, dcs, now); err != nil {
		return nil, err
	}
	return s.respond(domain, dcs, results, now), nil
}

// check decides reqs in one limiter call (several when there are more
// than limiter.MaxItems). An item the limiter could not evaluate fails
// the request, as a Redis error fails the reference's.
func (s *RLS) check(ctx context.Context, reqs []limiter.Request, out []limiter.Result) ([]limiter.Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if cap(out) < len(reqs) {
		out = make([]limiter.Result, 0, len(reqs))
	}
	for len(reqs) > 0 {
		n := min(len(reqs), limiter.MaxItems)
		res, err := s.checker.Check(limiter.FallBackBeforeDeadline(ctx), reqs[:n], out[len(out):])
		if err != nil {
			return nil, grpcError("", err)
		}
		out = append(out, res...)
		reqs = reqs[n:]
	}
	for i := range out {
		if err := out[i].Err; err != nil {
			return nil, grpcError("", err)
		}
	}
	return out, nil
}

// match finds each descriptor's rule and hits, applying unlimited and
// replaces as the reference's constructLimitsToCheck does.
//
// The counter keys are built end to end in sc.keys, and the descriptors'
// keys are strings over it, valid for the call only: the limiter hashes a
// request's key and keeps nothing of it (RLSConfig.Checker).
func (s *RLS) match(cfg *rls.Config, req *rlsv3.RateLimitRequest, dcs []descriptorCheck, sc *rlsScratch) error {
	domain := req.GetDomain()
	var replaced map[string]bool
	keys := sc.keys[:0]
	for i, d := range req.GetDescriptors() {
		dc := &dcs[i]
		*dc = descriptorCheck{req: -1}
		if !cfg.HasDomain(domain) {
			s.metrics.domainNotFound(domain)
			continue
		}
		entries := d.GetEntries()
		if o := d.GetLimit(); o != nil {
			unit := rls.Unit(o.GetUnit())
			if unit.Divider() == 0 {
				return wire.InvalidArgument(fmt.Sprintf("descriptors[%d].limit.unit", i), fmt.Sprintf("unknown unit %d", o.GetUnit()))
			}
			key := rls.OverrideKey(domain, entries)
			dc.rule = &rls.Rule{FullKey: key, RequestsPerUnit: o.GetRequestsPerUnit(), Unit: unit}
			dc.statsKey, dc.baseKey = key, overrideBaseKey(domain, entries)
			keys = rls.AppendCounterKey(keys, domain, entries, nil)
		} else {
			m, _ := rls.Lookup(cfg, domain, entries)
			dc.rule, dc.statsKey = m.Rule, m.StatsKey
			if m.Rule != nil {
				dc.baseKey = m.Rule.FullKey
				keys = rls.AppendCounterKey(keys, domain, entries, m.Shared)
			}
		}
		dc.keyEnd = len(keys)
		if dc.rule == nil {
			continue
		}
		for _, name := range dc.rule.Replaces {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			replaced[name] = true
		}
		if dc.rule.Unlimited {
			dc.rule, dc.unlimited = nil, true
			continue
		}
		dc.hits, dc.overflow = hitsOf(req, d)
	}
	sc.keys = keys
	start := 0
	for i := range dcs {
		dc := &dcs[i]
		if dc.keyEnd > start {
			dc.counter = unsafe.String(&keys[start], dc.keyEnd-start)
			dc.key = limitKey(dc.counter)
			start = dc.keyEnd
		}
		if r := dc.rule; r != nil && r.Name != "" && replaced != nil && replaced[r.Name] {
			dc.rule, dc.overflow = nil, 0
		}
	}
	return nil
}

// hitsOf is a descriptor's hits: its own hits_addend when set (0 too),
// else the request's, 0 meaning 1; or, for a hits_addend above
// math.MaxInt64, 0 hits and that overflow.
func hitsOf(req *rlsv3.RateLimitRequest, d *rlcommon.RateLimitDescriptor) (int64, uint64) {
	if h := d.GetHitsAddend(); h != nil {
		if h.GetValue() > math.MaxInt64 {
			return 0, h.GetValue()
		}
		return int64(h.GetValue()), 0
	}
	return int64(max(1, req.GetHitsAddend())), 0
}

// overflowError is the reference's error for the first descriptor whose
// hits_addend is above math.MaxInt64, if any: its Redis client sends the
// hits as a signed INCRBY, which Redis answers with a negative count that
// the client fails to read. The hits count in total_hits (as the
// reference counts them before its pipeline), and the call as a store
// error (its redis_error).
func (s *RLS) overflowError(domain string, dcs []descriptorCheck, now time.Time) error {
	for i := range dcs {
		dc := &dcs[i]
		if dc.overflow == 0 {
			continue
		}
		s.metrics.counters(domain, dc.statsKey, dc.baseKey).total.Add(float64(dc.overflow))
		s.metrics.storeError.Inc()
		div := dc.rule.Unit.Divider()
		key := dc.counter + strconv.FormatInt(now.Unix()/div*div, 10)
		msg := fmt.Sprintf("command [%q %q %q] in pipeline returned error: invalid character - at position 0 in parseUint",
			"INCRBY", key, strconv.FormatInt(int64(dc.overflow), 10))
		return referenceError(fmt.Sprintf("descriptors[%d].hits_addend", i), msg)
	}
	return nil
}

// referenceError is an error the reference answers with a plain Go error
// (gRPC Unknown, its message), with a BadRequest detail naming field.
func referenceError(field, msg string) error {
	st := status.New(codes.Unknown, msg)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}}); err == nil {
		st = d
	}
	return st.Err()
}

// limitKey is the limiter key of a descriptor's counter key (the
// reference's cache key without its time suffix): the key itself, or,
// past limiter.MaxKeyBytes, its head and a SHA-256 of the whole, so that
// long keys stay distinct rather than rejected.
func limitKey(k string) string {
	if len(k) <= limiter.MaxKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	const tail = 1 + 2*sha256.Size
	return k[:limiter.MaxKeyBytes-tail] + "#" + hex.EncodeToString(sum[:])
}

// overrideBaseKey is the bounded metric key of a limit override: its keys
// without their values.
func overrideBaseKey(domain string, entries []*rlcommon.RateLimitDescriptor_Entry) string {
	keys := make([]rls.KV, len(entries))
	for i, e := range entries {
		keys[i].Key = e.GetKey()
	}
	return rls.OverrideKey(domain, keys)
}

// validRLSText refuses a domain or descriptor entry that is not valid
// UTF-8, naming the field: the generated decoder does not check it, and
// distinct byte strings must not be merged into one key.
func validRLSText(domain string, descs []*rlcommon.RateLimitDescriptor) error {
	if !utf8.ValidString(domain) {
		return wire.InvalidArgument("domain", "must be valid UTF-8")
	}
	for i, d := range descs {
		for j, e := range d.GetEntries() {
			if !utf8.ValidString(e.GetKey()) {
				return wire.InvalidArgument(fmt.Sprintf("descriptors[%d].entries[%d].key", i, j), "must be valid UTF-8")
			}
			if !utf8.ValidString(e.GetValue()) {
				return wire.InvalidArgument(fmt.Sprintf("descriptors[%d].entries[%d].value", i, j), "must be valid UTF-8")
			}
		}
	}
	return nil
}
