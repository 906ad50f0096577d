package limiter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/activity"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/store"
)

// metrics are the limiter's Prometheus metrics. There are no per-key labels.
type metrics struct {
	// checks[algorithm][outcome]
	checks [bucket.LastAlgorithm + 1][3]prometheus.Counter
	// forwarded counts items sent to their owner on another node.
	forwarded prometheus.Counter
	// handedOff counts states pushed to their new owner.
	handedOff prometheus.Counter
	// fallbacks[mode] counts checks answered by a failure mode.
	fallbacks [3]prometheus.Counter
	// peerRefused counts peer calls refused because the caller is not a
	// ring member, by method.
	peerRefused *prometheus.CounterVec
	// invalidStates counts handed-off or fetched states dropped because
	// they fail store.Entry.Validate.
	invalidStates prometheus.Counter
	// reported counts fallback admissions counted on their owner since;
	// reportsDropped those dropped unreported (see reconcile.go).
	reported, reportsDropped prometheus.Counter
	// activity, if set, also receives the checks counted here: their
	// rate, and a sample of their keys for the hot keys (no per-key
	// metrics).
	activity *activity.Recorder
}

const (
	outcomeAllowed = iota
	outcomeDenied
	outcomeError
)

// newMetrics registers the metrics on reg. A nil reg keeps them unregistered.
func newMetrics(reg prometheus.Registerer, st *store.Store) (*metrics, error) {
	m := &metrics{}
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice",
		Name:      "checks_total",
		Help:      "Checks and acquires answered to this node's callers, by algorithm and result (allowed, denied, error); checks forwarded here by other nodes are not counted again.",
	}, []string{"algorithm", "result"})
	for a := bucket.TokenBucket; a <= bucket.LastAlgorithm; a++ {
		for o, name := range []string{"allowed", "denied", "error"} {
			m.checks[a][o] = checks.WithLabelValues(a.String(), name)
		}
	}
	m.forwarded = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "sluice", Name: "forwarded_checks_total",
		Help: "Checks this node sent to the node that owns their key.",
	})
	m.handedOff = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "sluice", Name: "handoff_states_total",
		Help: "Key states this node pushed to their new owner.",
	})
	fallbacks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "fallback_checks_total",
		Help: "Checks answered by their limit's failure mode because the key's owner was unreachable.",
	}, []string{"mode"})
	for _, mode := range []policy.FailureMode{policy.FailLocal, policy.FailDeny, policy.FailAllow} {
		m.fallbacks[mode] = fallbacks.WithLabelValues(mode.String())
	}
	m.peerRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_refused_total",
		Help: "Peer calls refused because the calling node is not a member of this node's ring, by method.",
	}, []string{"method"})
	m.invalidStates = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "sluice", Name: "invalid_states_total",
		Help: "Key states received from another node (handoff, fetch) and dropped because they are invalid: timestamps too far from now, counts or costs out of bounds, fields inconsistent.",
	})
	m.reported = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "sluice", Name: "fallback_reported_units_total",
		Help: "Units this node admitted in fallback (owner unreachable) and reported to the owner once it was reachable again, so the owner counts them.",
	})
	m.reportsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "sluice", Name: "fallback_reports_dropped_total",
		Help: "Keys whose fallback admissions were dropped unreported: the oldest when more keys than the cap await a report, or a report whose answer was lost.",
	})
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{
		checks, m.forwarded, m.handedOff, fallbacks, m.peerRefused, m.invalidStates, m.reported, m.reportsDropped,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "sluice", Name: "store_keys",
			Help: "Keys held in the node's store.",
		}, func() float64 { return float64(st.Stats().Keys) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "sluice", Name: "store_bytes",
			Help: "Estimated bytes of limit state held in the node's store.",
		}, func() float64 { return float64(st.Stats().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "sluice", Name: "store_clamped_states_total",
			Help: "Token bucket states found further ahead than their limit allows (made under another limit, or invalid) and read as an empty bucket.",
		}, func() float64 { return float64(st.Stats().Clamped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "sluice", Name: "store_refused_keys_total",
			Help: "New keys refused because the store reached its memory cap.",
		}, func() float64 { return float64(st.Stats().Refused) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// fellBack counts one answer by a failure mode.
func (m *metrics) fellBack(mode policy.FailureMode) {
	if int(mode) < len(m.fallbacks) {
		m.fallbacks[mode].Inc()
	}
}

// observeBatch counts the decisions of one Check call, adding to each
// counter once rather than once per item.
func (m *metrics) observeBatch(reqs []Request, results []Result, jobs []job) {
	var n [bucket.LastAlgorithm + 1][3]int
	if a := m.activity; a != nil {
		var denied uint64
		for i := range results {
			if outcomeOf(&results[i]) == outcomeDenied {
				denied++
			}
			a.Hot.Observe(jobs[i].hash, reqs[i].Key, reqs[i].Policy)
		}
		a.Series.Add(uint64(len(results)), denied)
	}
	for i := range results {
		a := jobs[i].limit.Algorithm
		if a > bucket.LastAlgorithm {
			continue
		}
		n[a][outcomeOf(&results[i])]++
	}
	for a := range n {
		for o, c := range n[a] {
			if c > 0 {
				m.checks[a][o].Add(float64(c))
			}
		}
	}
}

// outcomeOf classifies a result.
func outcomeOf(r *Result) int {
	switch {
	case r.Err != nil:
		return outcomeError
	case !r.Allowed:
		return outcomeDenied
	}
	return outcomeAllowed
}

// observe counts one decision, of req (hash: its bucket).
func (m *metrics) observe(req *Request, hash uint64, a bucket.Algorithm, r *Result) {
	if act := m.activity; act != nil {
		var denied uint64
		if outcomeOf(r) == outcomeDenied {
			denied = 1
		}
		act.Hot.Observe(hash, req.Key, req.Policy)
		act.Series.Add(1, denied)
	}
	if a <= bucket.LastAlgorithm {
		m.checks[a][outcomeOf(r)].Inc()
	}
}
