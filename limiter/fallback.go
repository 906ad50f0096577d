package limiter

import (
	"strings"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// FallbackRetryAfter is the retry-after of a check denied because its
// owner is unreachable and its limit fails closed (or its cost does not fit
// the local share).
const FallbackRetryAfter = time.Second

// fallbackLeasePrefix marks lease IDs handed out by a local fallback bucket.
const fallbackLeasePrefix = "local-"

// When a key's owner cannot be reached (a connect error, a deadline, an
// open circuit), the limit's failure mode answers, with Source
// SourceFallback and Owner naming the unreachable owner:
//
//   - FailLocal (the default): a bucket on this node with a conservative
//     share of the limit, LocalShare(limit, N), where N is the number of
//     nodes in the ring. The unreachable owner is one of them, so the other
//     nodes together admit at most (N-1)/N of the limit through their
//     shares while it is away; if the owner is only partitioned and still
//     answers its own callers, the cluster's total stays under twice the
//     limit. The share's own state lives in a separate local store and
//     expires like any state; what it admitted is reported to the owner
//     once it is reachable again (Reconcile, reconcile.go), so the owner's
//     count reflects it.
//   - FailDeny: denied, retry after FallbackRetryAfter (fail closed).
//   - FailAllow: allowed, unlimited (fail open). Discouraged.
//
// A check answered so because its owner did not answer in time is not
// also counted by the owner: the owner applies nothing once the sender's
// deadline has passed (see applyLocal; transport carries the deadline),
// and a check that may have reached the owner is never sent again (see
// ErrNotSent).
//
// A concurrency lease taken under FailLocal lives in the local share and
// carries an ID starting with "local-" (owners hand out hex IDs); Release
// returns it locally.

// LocalShare is the limit a node applies for a key whose owner is
// unreachable in a ring of n nodes: the limit and the burst divided by n,
// rounded down, and at least 1 (a fixed_window_hits limit of 0 stays 0).
func LocalShare(l bucket.Limit, n int) bucket.Limit {
	if n <= 1 || l.Limit == 0 {
		return l
	}
	share := l
	share.Limit = max(1, l.Limit/int64(n))
	if l.Algorithm == bucket.TokenBucket {
		share.Burst = max(1, l.Capacity()/int64(n))
	}
	return share
}

// ringSize is the number of nodes in v's ring (at least 1).
func ringSize(v *view) int {
	if v == nil || v.ring == nil || v.ring.Len() == 0 {
		return 1
	}
	return v.ring.Len()
}

// fallback answers a job whose owner could not be reached.
func (l *Limiter) fallback(v *view, j *job, owner ring.Member, cause error, now int64) {
	res := j.res
	res.Source, res.Owner, res.Err = SourceFallback, owner.Name, nil
	res.Result = l.fallbackTake(v, j.mode, j.hash, j.limit, j.cost, now)
	l.noteFallback(j, j.mode)
	l.metrics.fellBack(j.mode)
	l.log.Debug("owner unreachable: fallback", "owner", owner.Name, "mode", j.mode.String(), "err", cause)
}

// heldDenies returns the answer to j of the state this node holds of its
// key, if it holds one and that answer is a denial: the failure mode then
// answers no more than that. A node that owns the key and holds its state,
// but could not hear from a node that may hold more of it (a pending
// partition's holder that did not answer in time), would otherwise admit
// from its local share a key it knows to be spent; what the other node
// holds, merged in, could only deny it too. Token buckets only (their
// answer is a pure function of the state); other algorithms, and a node
// holding nothing of the key, get the failure mode.
func (l *Limiter) heldDenies(j *job, now int64) (bucket.Result, bool) {
	return deniesOn(l.store, j, now)
}

// deniesOn is heldDenies on the state st holds of j's key.
func deniesOn(st *store.Store, j *job, now int64) (bucket.Result, bool) {
	if st == nil || j.limit.Algorithm != bucket.TokenBucket || j.cost <= 0 || j.upTo || j.credit || j.report {
		return bucket.Result{}, false
	}
	held := st.Copy(now, []uint64{j.hash})
	if len(held) != 1 || held[0].Algorithm != bucket.TokenBucket {
		return bucket.Result{}, false
	}
	_, r, err := bucket.TakeToken(held[0].Token, j.limit, now, j.cost)
	if err != nil || r.Allowed {
		return bucket.Result{}, false
	}
	return r, true
}

// fallbackTake applies a failure mode to one check.
func (l *Limiter) fallbackTake(v *view, mode policy.FailureMode, hash uint64, lim bucket.Limit, cost, now int64) bucket.Result {
	capacity := lim.Capacity()
	switch mode {
	case policy.FailDeny:
		if cost == 0 {
			return bucket.Result{Allowed: true, Limit: capacity}
		}
		return bucket.Result{Limit: capacity, RetryAfter: FallbackRetryAfter}
	case policy.FailAllow:
		return bucket.Result{Allowed: true, Limit: capacity, Remaining: capacity}
	}
	share := LocalShare(lim, ringSize(v))
	if cost > share.Capacity() && lim.Algorithm != bucket.FixedWindowHits { // hits count whatever their cost
		return bucket.Result{Limit: share.Capacity(), RetryAfter: FallbackRetryAfter}
	}
	var res bucket.Result
	var err error
	if lim.Algorithm == bucket.Concurrency {
		_, res, err = l.shares.Acquire(hash, share, now, 0, time.Second)
	} else {
		res, err = l.shares.Take(hash, share, now, cost)
	}
	if err != nil {
		return bucket.Result{Limit: share.Capacity(), RetryAfter: FallbackRetryAfter}
	}
	return res
}

// fallbackAcquire applies a failure mode to an Acquire; a local lease is
// bound to holder, as an owner's is.
func (l *Limiter) fallbackAcquire(v *view, r *resolved, cost int64, ttl time.Duration, holder uint64, now int64) (bucket.Result, string) {
	switch r.mode {
	case policy.FailDeny, policy.FailAllow:
		return l.fallbackTake(v, r.mode, r.hash, r.limit, cost, now), ""
	}
	share := LocalShare(r.limit, ringSize(v))
	if cost > share.Capacity() {
		return bucket.Result{Limit: share.Capacity(), RetryAfter: FallbackRetryAfter}, ""
	}
	id, res, err := l.shares.AcquireFor(r.hash, share, now, cost, ttl, holder)
	if err != nil || !res.Allowed || id.IsZero() {
		return res, ""
	}
	return res, fallbackLeasePrefix + id.String()
}

// fallbackLease parses a lease ID handed out by a local share.
func fallbackLease(id string) (store.LeaseID, bool) {
	rest, ok := strings.CutPrefix(id, fallbackLeasePrefix)
	if !ok {
		return store.LeaseID{}, false
	}
	n, err := store.ParseLeaseID(rest)
	return n, err == nil
}
