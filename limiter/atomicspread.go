package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// Atomic checks across owners: a batch whose keys live on several nodes
// (or whose owner's ring disagreed) is decided by reserving each item's
// cost on its owner in turn (ReserveAll). All reserved, the call is
// allowed, and each reservation lapses at its estimate after
// AtomicSpreadTTL: that is the commit. One denied, the reservations made
// are cancelled (a full refund) and nothing stays charged. Under any
// concurrency no item is admitted past its limit; a concurrent call may be
// denied by units another call held for the moment before it cancelled
// them. Token buckets, fixed and sliding windows and calendar quotas only:
// a sliding log cannot reserve, and fixed_window_hits counts denied hits.
// A key holds at most store.MaxReservations live reservations, so such
// calls on one key are bounded by that many per AtomicSpreadTTL.

// AtomicSpreadTTL is how long the reservations of an allowed cross-owner
// atomic check are kept before they lapse at their estimates.
const AtomicSpreadTTL = time.Second

// checkAtomicSpread decides reqs (resolved as jobs) all or nothing by
// reservations, filling out (one result per item, as CheckAtomic's).
func (l *Limiter) checkAtomicSpread(ctx context.Context, reqs []Request, jobs []job, out []Result) error {
	for i := range jobs {
		if a := jobs[i].limit.Algorithm; a == bucket.SlidingLog || a == bucket.FixedWindowHits {
			return &FieldError{i, "algorithm", "an atomic check of keys on several nodes takes token_bucket, fixed_window and sliding_window limits only", ErrInvalid}
		}
	}
	var (
		rr      []ReserveRequest
		idx     []int
		allowed = true
		made    []Reservation
	)
	for i := range reqs {
		switch c := reqs[i].Cost; {
		case c == 0:
		case c > jobs[i].limit.Capacity():
			allowed = false // never allowed: more than the capacity (no retry)
		default:
			rr = append(rr, ReserveRequest{Request: reqs[i], Estimate: c, TTL: AtomicSpreadTTL, Holder: reqs[i].Client})
			idx = append(idx, i)
		}
	}
	if allowed && len(rr) > 0 {
		var err error
		made, allowed, err = l.ReserveAll(ctx, rr)
		if err != nil {
			var fe *FieldError
			if errors.As(err, &fe) && fe.Index >= 0 && fe.Index < len(idx) {
				fe.Index = idx[fe.Index]
			}
			return err
		}
	}
	// Each item's state after the decision, read on its owner.
	reads := make([]Request, len(reqs))
	copy(reads, reqs)
	for i := range reads {
		reads[i].Cost = 0
	}
	res, err := l.Check(ctx, reads, nil)
	if err != nil {
		return err
	}
	for i := range out {
		r := res[i]
		if r.Err != nil {
			return r.Err
		}
		r.Allowed, r.RetryAfter = allowed, 0
		out[i] = r
	}
	if !allowed {
		for k := range made {
			if !made[k].Allowed && made[k].RetryAfter > 0 {
				out[idx[k]].RetryAfter = made[k].RetryAfter
			}
		}
	}
	return nil
}
