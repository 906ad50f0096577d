package limiter

import (
	"context"
	"sync"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
)

// Fallback reconciliation. What a node admits in fallback (FailLocal's
// share, FailAllow) while a key's owner is unreachable is not in the
// owner's count. The node keeps, per key, the units it admitted so (a
// count, not the checks), for at most Config.ReportKeys keys, dropping
// the oldest key beyond that (counted in fallback_reports_dropped_total).
// Reconcile sends them to the keys' owners, batched through Peers like
// checks, as report items: a token bucket spends as many as it has, up to
// the count (never below empty), other limits take the count as a check.
// So once the owner is back its count reflects what the cluster admitted.
// Best effort: a report certainly not applied (its call did not leave, or
// the owner refused it or answered an error) is kept for the next
// Reconcile; one that may have reached the owner is dropped rather than
// risk counting it twice. Concurrency limits are not
// reported (a lease is not a count).

// reports holds the fallback admissions not yet reported. Safe for
// concurrent use.
type reports struct {
	mu    sync.Mutex
	max   int // < 0: off
	m     map[uint64]*report
	order []uint64 // keys in the order they were added, oldest first (may hold stale ones)
}

type report struct {
	limit bucket.Limit
	units int64
}

// add notes units admitted in fallback for hash and reports how many keys
// it dropped to make room.
func (r *reports) add(hash uint64, lim bucket.Limit, units int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.max < 0 || units <= 0 {
		return 0
	}
	if p := r.m[hash]; p != nil && p.limit == lim {
		p.units = min(p.units+units, MaxCost)
		return 0
	}
	if r.m == nil {
		r.m = map[uint64]*report{}
	}
	dropped := 0
	for len(r.m) >= r.max && len(r.order) > 0 {
		oldest := r.order[0]
		r.order = r.order[1:]
		if _, ok := r.m[oldest]; ok {
			delete(r.m, oldest)
			dropped++
		}
	}
	if len(r.order) > 2*r.max+16 { // compact the stale entries
		live := r.order[:0]
		for _, h := range r.order {
			if _, ok := r.m[h]; ok {
				live = append(live, h)
			}
		}
		r.order = live
	}
	r.m[hash] = &report{limit: lim, units: units}
	r.order = append(r.order, hash)
	return dropped
}

// drop forgets the reports of keys.
func (r *reports) drop(keys []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		delete(r.m, k) // r.order keeps a stale entry, compacted later
	}
}

// take removes and returns every report.
func (r *reports) take() map[uint64]*report {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.m
	r.m, r.order = nil, nil
	return m
}

// pending returns the number of keys with admissions to report.
func (r *reports) pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// noteFallback records a fallback answer for reporting.
func (l *Limiter) noteFallback(j *job, mode policy.FailureMode) {
	if mode == policy.FailDeny || !j.res.Allowed || j.cost <= 0 || j.limit.Algorithm == bucket.Concurrency || j.upTo || j.credit || j.report {
		return
	}
	if dropped := l.reports.add(j.hash, j.limit, j.cost); dropped > 0 {
		l.metrics.reportsDropped.Add(float64(dropped))
	}
}

// PendingReports returns how many keys have fallback admissions waiting
// to be reported to their owner.
func (l *Limiter) PendingReports() int { return l.reports.pending() }

// Reconcile reports the fallback admissions of this node to the keys'
// owners (see reconcile.go) and returns how many keys it reported. Those
// whose owner is still unreachable stay for the next call. The node calls
// it periodically.
func (l *Limiter) Reconcile(ctx context.Context) int {
	m := l.reports.take()
	if len(m) == 0 {
		return 0
	}
	jobs := make([]job, 0, len(m))
	results := make([]Result, len(m))
	for h, r := range m {
		jobs = append(jobs, job{hash: h, limit: r.limit, cost: r.units, report: true, res: &results[len(jobs)]})
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.fetchTimeout)
	defer cancel()
	l.decide(rctx, l.view.Load(), 0, false, jobs, l.clock().UnixNano())
	reported, dropped := 0, 0
	for i := range jobs {
		j := &jobs[i]
		switch err := j.res.Err; {
		case err == nil:
			reported++
			l.metrics.reported.Add(float64(j.cost))
		case !j.maybeApplied: // not sent, refused, or answered with an error
			dropped += l.reports.add(j.hash, j.limit, j.cost) // try again later
		default:
			dropped++ // it may have been counted: never twice
		}
	}
	if dropped > 0 {
		l.metrics.reportsDropped.Add(float64(dropped))
	}
	return reported
}
