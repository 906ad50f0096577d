package api

import (
	"math"
	"strconv"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/rls"
)

// The reference's names of its rate limit response headers.
const (
	DefaultLimitHeader     = "RateLimit-Limit"
	DefaultRemainingHeader = "RateLimit-Remaining"
	DefaultResetHeader     = "RateLimit-Reset"
)

// rlsHeaders are the names of the rate limit response headers.
type rlsHeaders struct{ limit, remaining, reset string }

func newRLSHeaders(limit, remaining, reset string) *rlsHeaders {
	h := &rlsHeaders{DefaultLimitHeader, DefaultRemainingHeader, DefaultResetHeader}
	if limit != "" {
		h.limit = limit
	}
	if remaining != "" {
		h.remaining = remaining
	}
	if reset != "" {
		h.reset = reset
	}
	return h
}

// smallResponse is the most descriptors whose response respond builds in
// one allocation (Envoy sends one or a few per call).
const smallResponse = 2

// rlsResponse is a response of up to smallResponse descriptors with its
// parts, allocated at once.
type rlsResponse struct {
	resp     rlsv3.RateLimitResponse
	ptrs     [smallResponse]*rlsv3.RateLimitResponse_DescriptorStatus
	statuses [smallResponse]rlsv3.RateLimitResponse_DescriptorStatus
	limits   [smallResponse]rlsv3.RateLimitResponse_RateLimit
	durs     [smallResponse]durationpb.Duration
}

// rlsResponse1 is a response of one descriptor, allocated at once.
type rlsResponse1 struct {
	resp   rlsv3.RateLimitResponse
	ptr    [1]*rlsv3.RateLimitResponse_DescriptorStatus
	status [1]rlsv3.RateLimitResponse_DescriptorStatus
	limit  [1]rlsv3.RateLimitResponse_RateLimit
	dur    [1]durationpb.Duration
}

// respond builds the response from the checks' results.
func (s *RLS) respond(domain string, dcs []descriptorCheck, results []limiter.Result, now time.Time) *rlsv3.RateLimitResponse {
	var (
		resp     *rlsv3.RateLimitResponse
		statuses []rlsv3.RateLimitResponse_DescriptorStatus
		limits   []rlsv3.RateLimitResponse_RateLimit
		durs     []durationpb.Duration
	)
	switch {
	case len(dcs) == 1:
		b := new(rlsResponse1)
		resp, statuses, limits, durs = &b.resp, b.status[:], b.limit[:len(results)], b.dur[:len(results)]
		resp.Statuses = b.ptr[:]
	case len(dcs) <= smallResponse:
		b := new(rlsResponse)
		resp, statuses, limits, durs = &b.resp, b.statuses[:len(dcs)], b.limits[:len(results)], b.durs[:len(results)]
		resp.Statuses = b.ptrs[:len(dcs)]
	default:
		// One allocation each for the statuses, their limits and durations.
		resp = &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(dcs))}
		statuses = make([]rlsv3.RateLimitResponse_DescriptorStatus, len(dcs))
		limits = make([]rlsv3.RateLimitResponse_RateLimit, len(results))
		durs = make([]durationpb.Duration, len(results))
	}
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	// The descriptor the headers report, as the reference picks it.
	closest, least := -1, uint32(math.MaxUint32)
	for i := range dcs {
		dc, st := &dcs[i], &statuses[i]
		resp.Statuses[i] = st
		st.Code = rlsv3.RateLimitResponse_OK
		switch {
		case dc.unlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		case dc.rule == nil:
			continue
		}
		r := &results[dc.req]
		rule := dc.rule
		cl, dur := &limits[dc.req], &durs[dc.req]
		cl.RequestsPerUnit, cl.Unit, cl.Name = rule.RequestsPerUnit, rlsv3.RateLimitResponse_RateLimit_Unit(rule.Unit), rule.Name
		dur.Seconds = rule.Unit.ResetAfter(now)
		st.CurrentLimit, st.DurationUntilReset = cl, dur
		st.LimitRemaining = uint32(min(max(r.Remaining, 0), math.MaxUint32))
		over := !r.Allowed
		s.metrics.observe(domain, dc, r, s.near)
		switch {
		case !over:
		case rule.ShadowMode:
			st.LimitRemaining = 0
		case rule.QuotaMode:
			st.LimitRemaining, st.DurationUntilReset = 0, nil
		default:
			st.Code, st.LimitRemaining = rlsv3.RateLimitResponse_OVER_LIMIT, 0
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if st.LimitRemaining < least || st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			closest, least = i, st.LimitRemaining
		}
	}
	if s.headers != nil && closest >= 0 {
		resp.ResponseHeadersToAdd = s.headers.values(dcs[closest].rule, statuses[closest].LimitRemaining, now)
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT && s.shadow {
		resp.OverallCode = rlsv3.RateLimitResponse_OK
		s.metrics.globalShadow.Inc()
	}
	return resp
}

// values are the headers of a descriptor's rule and remaining, as the
// reference writes them: decimal, the reset in whole seconds.
func (h *rlsHeaders) values(rule *rls.Rule, remaining uint32, now time.Time) []*core.HeaderValue {
	hv := make([]core.HeaderValue, 3)
	hv[0].Key, hv[0].Value = h.limit, strconv.FormatUint(uint64(rule.RequestsPerUnit), 10)
	hv[1].Key, hv[1].Value = h.remaining, strconv.FormatUint(uint64(remaining), 10)
	hv[2].Key, hv[2].Value = h.reset, strconv.FormatInt(rule.Unit.ResetAfter(now), 10)
	return []*core.HeaderValue{&hv[0], &hv[1], &hv[2]}
}
