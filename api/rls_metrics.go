package api

import (
	"math"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/limiter"
)

// The RLS metrics are named as envoyproxy/ratelimit's Prometheus mapping
// names them (its statsd names ratelimit.service.rate_limit.DOMAIN.KEY.STAT
// become ratelimit_service_rate_limit_STAT), with the labels domain and
// key, the metric key below the domain ("key1_value1.key2"):
//
//	ratelimit_service_rate_limit_total_hits      hits of descriptors that matched a rule
//	ratelimit_service_rate_limit_over_limit      hits over the limit
//	ratelimit_service_rate_limit_near_limit      hits within the limit, above NearLimitRatio of it
//	ratelimit_service_rate_limit_within_limit    hits within the limit
//	ratelimit_service_rate_limit_shadow_mode     hits over the limit that shadow_mode let through
//	ratelimit_service_rate_limit_domain_not_found{domain}  descriptors of an unknown domain
//	ratelimit_service_global_shadow_mode                   calls over the limit the global shadow mode answered OK
//	ratelimit_service_config_load_success / _error         configuration loads
//	ratelimit_service_should_rate_limit_error{err_type}    failed calls: service_error (bad
//	                                                       request), store_error (a counter could not be reached or kept)
//
// They are counters, without the _total suffix, so that dashboards made
// for the reference keep working. A key carries a request's values only
// where the reference's does (detailed_metric, value_to_metric, limit
// overrides): such keys, and unknown domains, are capped at
// RLSConfig.MaxMetricKeys series; past the cap a key is counted under its
// rule's own key ("_other" for a domain), and
// sluice_rls_metric_keys_folded_total counts it.
//
// A hits_addend that crosses a threshold is split as the reference splits
// it (hitStatsOf): the hits past the limit are over_limit, those between
// the near-limit threshold and the limit near_limit.

// DefaultMaxMetricKeys is the default cap on request-derived series.
const DefaultMaxMetricKeys = 10000

// otherDomain is the domain label of unknown domains past the cap.
const otherDomain = "_other"

// seriesKey names a series: a domain and a metric key.
type seriesKey struct{ domain, key string }

// ruleCounters are one (domain, key) series of each counter.
type ruleCounters struct {
	total, over, near, within, shadow prometheus.Counter
}

type rlsMetrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec
	notFound                                                 *prometheus.CounterVec
	loadSuccess, loadError                                   prometheus.Counter
	serviceError, storeError                                 prometheus.Counter
	globalShadow                                             prometheus.Counter
	folded                                                   prometheus.Counter

	mu      sync.RWMutex
	series  map[seriesKey]*ruleCounters
	domains map[string]prometheus.Counter // domain_not_found by domain
	dynamic int                           // request-derived series so far
	max     int
}

func newRLSMetrics(reg prometheus.Registerer, maxKeys int) (*rlsMetrics, error) {
	if maxKeys == 0 {
		maxKeys = DefaultMaxMetricKeys
	}
	vec := func(stat, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ratelimit", Subsystem: "service", Name: "rate_limit_" + stat, Help: help,
		}, []string{"domain", "key"})
	}
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ratelimit", Subsystem: "service", Name: "should_rate_limit_error",
		Help: "ShouldRateLimit calls that failed: service_error (an invalid request), store_error (a counter could not be reached or kept).",
	}, []string{"err_type"})
	m := &rlsMetrics{
		totalHits:   vec("total_hits", "Hits of descriptors that matched a rate limit rule."),
		overLimit:   vec("over_limit", "Hits over their rule's limit."),
		nearLimit:   vec("near_limit", "Hits within their rule's limit but above its near-limit ratio."),
		withinLimit: vec("within_limit", "Hits within their rule's limit."),
		shadowMode:  vec("shadow_mode", "Hits over the limit of a shadow_mode rule, answered OK."),
		notFound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "ratelimit", Subsystem: "service", Name: "rate_limit_domain_not_found",
			Help: "Descriptors of a domain the configuration does not have.",
		}, []string{"domain"}),
		loadSuccess: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ratelimit", Subsystem: "service",
			Name: "config_load_success", Help: "Rate limit configurations loaded and applied."}),
		loadError: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ratelimit", Subsystem: "service",
			Name: "config_load_error", Help: "Rate limit configuration loads that failed; the configuration in force stayed."}),
		globalShadow: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "ratelimit", Subsystem: "service",
			Name: "global_shadow_mode", Help: "Calls over the limit that the global shadow mode answered OK."}),
		serviceError: errs.WithLabelValues("service_error"),
		storeError:   errs.WithLabelValues("store_error"),
		folded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "rls",
			Name: "metric_keys_folded_total", Help: "RLS metric updates counted under their rule's key because request-derived keys reached the cap."}),
		series:  map[seriesKey]*ruleCounters{},
		domains: map[string]prometheus.Counter{},
		max:     maxKeys,
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode,
		m.notFound, m.loadSuccess, m.loadError, errs, m.folded, m.globalShadow} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// counters returns the series of statsKey in domain, or of baseKey (the
// rule's own key) when statsKey differs from it and the cap is reached.
func (m *rlsMetrics) counters(domain, statsKey, baseKey string) *ruleCounters {
	id := seriesKey{domain, statsKey}
	m.mu.RLock()
	c := m.series[id]
	m.mu.RUnlock()
	if c != nil {
		return c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.countersLocked(domain, statsKey, baseKey)
}

func (m *rlsMetrics) countersLocked(domain, statsKey, baseKey string) *ruleCounters {
	id := seriesKey{domain, statsKey}
	if c := m.series[id]; c != nil {
		return c
	}
	if statsKey != baseKey {
		if m.dynamic >= m.max {
			m.folded.Inc()
			return m.countersLocked(domain, baseKey, baseKey)
		}
		m.dynamic++
	}
	key := strings.TrimPrefix(statsKey, domain+".")
	c := &ruleCounters{
		total:  m.totalHits.WithLabelValues(domain, key),
		over:   m.overLimit.WithLabelValues(domain, key),
		near:   m.nearLimit.WithLabelValues(domain, key),
		within: m.withinLimit.WithLabelValues(domain, key),
		shadow: m.shadowMode.WithLabelValues(domain, key),
	}
	m.series[id] = c
	return c
}

// domainNotFound counts a descriptor of an unknown domain.
func (m *rlsMetrics) domainNotFound(domain string) {
	m.mu.RLock()
	c := m.domains[domain]
	m.mu.RUnlock()
	if c == nil {
		m.mu.Lock()
		if c = m.domains[domain]; c == nil {
			label := domain
			if m.dynamic >= m.max {
				m.folded.Inc()
				label = otherDomain
			} else {
				m.dynamic++
			}
			c = m.notFound.WithLabelValues(label)
			if label == domain {
				m.domains[domain] = c
			}
		}
		m.mu.Unlock()
	}
	c.Inc()
}

// observe counts one descriptor's hits as the reference's base limiter
// does, from its check's result.
func (m *rlsMetrics) observe(domain string, dc *descriptorCheck, r *limiter.Result, ratio float32) {
	c := m.counters(domain, dc.statsKey, dc.baseKey)
	st := hitStatsOf(r, dc.hits, ratio)
	c.total.Add(float64(dc.hits))
	addNonZero(c.over, st.over)
	addNonZero(c.near, st.near)
	addNonZero(c.within, st.within)
	if dc.rule.ShadowMode {
		addNonZero(c.shadow, st.over)
	}
}

func addNonZero(c prometheus.Counter, v int64) {
	if v > 0 {
		c.Add(float64(v))
	}
}

// hitStats are one descriptor's hits split as the reference's
// GetResponseDescriptorStatus splits them (checkOverLimitThreshold,
// checkNearLimitThreshold; the shadow_mode hits are the over ones).
type hitStats struct{ over, near, within int64 }

// hitStatsOf splits hits from the window's count after them: over the
// limit, the hits past it are over_limit and those between the near-limit
// threshold (floor(limit × ratio), in float32 as the reference) and the
// limit near_limit; within it, all are within_limit, and those past the
// threshold near_limit too. A denied result without its count (answered
// without the counter, e.g. by a fallback) counts all its hits over.
func hitStatsOf(r *limiter.Result, hits int64, ratio float32) hitStats {
	limit := r.Limit
	near := int64(math.Floor(float64(float32(limit) * ratio)))
	after := r.Count
	switch {
	case r.Allowed:
		after = limit - r.Remaining
	case after <= limit: // denied without its count
		return hitStats{over: hits}
	}
	before := max(after-hits, 0)
	var st hitStats
	if after > limit {
		if before >= limit {
			st.over = hits
		} else {
			st.over = after - limit
			st.near = limit - max(near, before)
		}
		return st
	}
	st.within = hits
	if after > near {
		if before >= near {
			st.near = hits
		} else {
			st.near = after - near
		}
	}
	return st
}
