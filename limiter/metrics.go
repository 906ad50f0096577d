package limiter

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/activity"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/store"
)

// metrics are the limiter's Prometheus metrics. There are no per-key labels.
type metrics struct {
	// checksVec is sluice_checks_total{policy,algorithm,result}; checks
	// holds its counters for the policy set in force (see setPolicies).
	checksVec *prometheus.CounterVec
	checks    atomic.Pointer[policyCounters]
	checksMu  sync.Mutex // serializes setPolicies
	// forwarded counts items sent to their owner on another node.
	forwarded prometheus.Counter
	// handedOff counts states pushed to their new owner.
	handedOff prometheus.Counter
	// fallbacks[mode] counts checks answered by a failure mode.
	fallbacks [3]prometheus.Counter
	// notOwned[reason] counts decisions as owner refused (ownerlease.go).
	notOwned [2]prometheus.Counter
	// peerRefused counts peer calls refused because the caller is not a
	// ring member, by method.
	peerRefused *prometheus.CounterVec
	// epochRefused and epochRedirected count peer calls refused for their
	// epoch (epochs.go): this node behind and not caught up in time, or
	// ahead and not the keys' owner.
	epochRefused, epochRedirected prometheus.Counter
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

// checkCounters are the checks_total counters of one policy label, by
// [algorithm][outcome].
type checkCounters [bucket.LastAlgorithm + 1][3]prometheus.Counter

// policyCounters are the checks_total counters of a policy set: one row per
// configured policy name, and policy="" for inline limits and for names
// the set does not have (a request's name never becomes a label).
type policyCounters struct {
	inline *checkCounters
	named  map[string]*checkCounters
}

// of returns the counters of a request's policy name.
func (pc *policyCounters) of(name string) *checkCounters {
	if name != "" {
		if c, ok := pc.named[name]; ok {
			return c
		}
	}
	return pc.inline
}

// newMetrics registers the metrics on reg. A nil reg keeps them unregistered.
func newMetrics(reg prometheus.Registerer, st *store.Store, set *policy.Set) (*metrics, error) {
	m := &metrics{}
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice",
		Name:      "checks_total",
		Help:      "Checks and acquires answered to this node's callers, by policy (\"\" for inline limits), algorithm and result (allowed, denied, error); checks forwarded here by other nodes are not counted again.",
	}, []string{"policy", "algorithm", "result"})
	m.checksVec = checks
	m.setPolicies(set)
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
	notOwned := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "owner_refused_total",
		Help: "Checks, grants, credits and reports this node did not decide as the key's owner, by reason: no_lease (it holds no owner lease renewed through a majority), dead_wait (the key moved from a member removed as dead less than the dead wait ago).",
	}, []string{"reason"})
	m.notOwned[reasonNoLease] = notOwned.WithLabelValues("no_lease")
	m.notOwned[reasonDeadWait] = notOwned.WithLabelValues("dead_wait")
	m.peerRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_refused_total",
		Help: "Peer calls refused because the calling node is not a member of this node's ring, by method.",
	}, []string{"method"})
	epochRefused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Name: "peer_epoch_refused_total",
		Help: "Peer calls refused for the sender's epoch: reason behind (this node did not apply it within the catch-up wait) or ahead (a redirect: this node's epoch is later and it does not own the keys).",
	}, []string{"reason"})
	m.epochRefused, m.epochRedirected = epochRefused.WithLabelValues("behind"), epochRefused.WithLabelValues("ahead")
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
		checks, m.forwarded, m.handedOff, fallbacks, notOwned, m.peerRefused, epochRefused, m.invalidStates, m.reported, m.reportsDropped,
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
		&evictionsCollector{st: st, desc: prometheus.NewDesc("sluice_store_evictions_total",
			"States dropped to admit a new key at the store's memory cap, by reason: expired (swept early), lru (a live inline-limit key, least recently used first).",
			[]string{"reason"}, nil)},
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// countersFor returns the checks_total counters of policy label name.
func (m *metrics) countersFor(name string) *checkCounters {
	c := new(checkCounters)
	for a := bucket.TokenBucket; a <= bucket.LastAlgorithm; a++ {
		for o, result := range []string{"allowed", "denied", "error"} {
			c[a][o] = m.checksVec.WithLabelValues(name, a.String(), result)
		}
	}
	return c
}

// setPolicies makes the checks_total rows those of set's policy names (and
// policy=""): a new name gets its row, a removed one's row is deleted, so
// the series stay bounded by the names configured. Checks in flight under
// the old set may still count under a removed name's deleted counters.
func (m *metrics) setPolicies(set *policy.Set) {
	m.checksMu.Lock()
	defer m.checksMu.Unlock()
	old := m.checks.Load()
	pc := &policyCounters{named: make(map[string]*checkCounters, set.Len())}
	if old != nil {
		pc.inline = old.inline
	} else {
		pc.inline = m.countersFor("")
	}
	for _, name := range set.Names() {
		if c, ok := old.namedCounters(name); ok {
			pc.named[name] = c
		} else {
			pc.named[name] = m.countersFor(name)
		}
	}
	if old != nil {
		for name := range old.named {
			if _, ok := pc.named[name]; !ok {
				m.checksVec.DeletePartialMatch(prometheus.Labels{"policy": name})
			}
		}
	}
	m.checks.Store(pc)
}

// namedCounters returns the counters of a configured name; pc may be nil.
func (pc *policyCounters) namedCounters(name string) (*checkCounters, bool) {
	if pc == nil {
		return nil, false
	}
	c, ok := pc.named[name]
	return c, ok
}

// fellBack counts one answer by a failure mode.
func (m *metrics) fellBack(mode policy.FailureMode) {
	if int(mode) < len(m.fallbacks) {
		m.fallbacks[mode].Inc()
	}
}

// Reasons a decision as owner is refused (ownerlease.go).
const (
	reasonNoLease = iota
	reasonDeadWait
)

// notOwner counts one decision as owner refused for reason.
func (m *metrics) notOwner(reason int) { m.notOwned[reason].Inc() }

// observeBatch counts the decisions of one Check call, adding to each
// counter once rather than once per item.
func (m *metrics) observeBatch(reqs []Request, results []Result, jobs []job) {
	var n [bucket.LastAlgorithm + 1][3]int
	if a := m.activity; a != nil {
		var denied, grantReqs uint64
		for i := range results {
			if jobs[i].upTo {
				grantReqs++ // a grant request is not a check
				continue
			}
			if outcomeOf(&results[i]) == outcomeDenied {
				denied++
			}
			a.Hot.Observe(jobs[i].hash, reqs[i].Key, reqs[i].Policy)
		}
		a.Series.Add(uint64(len(results))-grantReqs, denied)
	}
	// Items of one policy are counted together: n holds the counts of
	// cur's policy until the next item names another.
	pc := m.checks.Load()
	cur, curName := pc.inline, ""
	for i := range results {
		a := jobs[i].limit.Algorithm
		if a > bucket.LastAlgorithm || jobs[i].upTo {
			continue
		}
		if p := reqs[i].Policy; p != curName {
			addCounts(cur, &n)
			cur, curName = pc.of(p), p
		}
		n[a][outcomeOf(&results[i])]++
	}
	addCounts(cur, &n)
}

// addCounts adds n to c and zeroes n.
func addCounts(c *checkCounters, n *[bucket.LastAlgorithm + 1][3]int) {
	for a := range n {
		for o, k := range n[a] {
			if k > 0 {
				c[a][o].Add(float64(k))
				n[a][o] = 0
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
		m.checks.Load().of(req.Policy)[a][outcomeOf(r)].Inc()
	}
}

// evictionsCollector reads the store's eviction counters at each scrape,
// one series per reason.
type evictionsCollector struct {
	st   *store.Store
	desc *prometheus.Desc
}

func (c *evictionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *evictionsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.st.Stats()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(s.EvictedExpired), "expired")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(s.EvictedLRU), "lru")
}
