package bucket

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// LeaseState is a concurrency limit: the leases currently held.
type LeaseState struct {
	// Leases are the leases held, kept ordered by Expires when this package
	// writes them (any order is accepted).
	Leases []Lease
}

// Lease is Cost units held until Expires (unix ns) unless released first.
type Lease struct {
	ID      uint64
	Cost    int64
	Expires int64
	// Tag is carried with the lease for its holder's store (the rest of
	// a 128-bit lease identifier); this package never reads it.
	Tag uint64
	// Holder is carried with the lease for its store too: the tag of the
	// client identity the lease is bound to (0 for none); this package
	// never reads it.
	Holder uint64
}

// ExpiresAt is the instant from which the state equals the zero state.
func (s LeaseState) ExpiresAt() int64 {
	var last int64
	for _, l := range s.Leases {
		if l.Expires > last {
			last = l.Expires
		}
	}
	return last
}

// Acquire takes a lease of cost units with identifier id, lasting ttl. A lease
// is live while now < Expires. The units in flight are the sum of the costs of
// the live leases, and Acquire is allowed iff in-flight + cost <= l.Limit; an
// allowed Acquire adds the lease {id, cost, now+ttl}. Expired leases are
// dropped on every call.
//
// Renewal: if a live lease with the same id is held, Acquire renews it: the
// lease's own cost is not counted against it, and if the rest of the leases
// plus cost fit, the lease is replaced by {id, cost, now+ttl} (so a renewal may
// shorten, extend, grow or shrink it); if not, it is denied and the lease is
// kept as it was.
//
// A cost of 0 reads usage: it creates and renews nothing and ignores id and
// ttl. For cost > 0, ttl must be in (0, MaxPeriod]; otherwise the error is a
// *FieldError naming "ttl" that wraps ErrInvalidLimit.
//
// Clamp: leases keep absolute expiry instants and the state keeps no other
// time, so there is nothing to clamp to: a backwards clock step only keeps
// leases live for longer, which errs on the side of denying.
//
// Remaining is Limit minus the units in flight after the call; ResetAfter is
// the time until every lease has expired; when denied, RetryAfter is the exact
// time until enough leases expire for the cost to fit, if none is released.
//
// Acquire may reuse the backing array of s.Leases: the caller must not use s
// after the call.
func Acquire(s LeaseState, l Limit, now, cost int64, id uint64, ttl time.Duration) (LeaseState, Result, error) {
	limit := l.Limit
	if cost < 0 || cost > limit {
		return s, Result{Limit: limit}, costError(cost, limit)
	}
	if cost > 0 {
		if ttl <= 0 {
			return s, Result{Limit: limit}, &FieldError{"ttl", "must be > 0", ErrInvalidLimit}
		}
		if ttl > MaxPeriod {
			return s, Result{Limit: limit}, &FieldError{"ttl", fmt.Sprintf("must be <= %v", MaxPeriod), ErrInvalidLimit}
		}
	}
	leases, inflight, sorted, at := dropExpired(s.Leases, now, id)
	var held int64
	if cost == 0 {
		at = -1 // a read renews nothing
	} else if at >= 0 {
		held = leases[at].Cost
	}
	others := inflight - held
	res := Result{Limit: limit}
	if cost == 0 || others+cost <= limit {
		res.Allowed = true
		if cost > 0 {
			if at >= 0 {
				leases = slices.Delete(leases, at, at+1)
			}
			leases = insertLease(leases, Lease{ID: id, Cost: cost, Expires: now + int64(ttl)})
			inflight = others + cost
		}
	} else {
		if !sorted {
			slices.SortStableFunc(leases, func(a, b Lease) int { return cmp.Compare(a.Expires, b.Expires) })
			sorted = true
		}
		excess := others + cost - limit
		skip := at >= 0
		for _, le := range leases {
			if skip && le.ID == id {
				skip = false
				continue // the lease being renewed: its cost is already excluded
			}
			if excess -= le.Cost; excess <= 0 {
				res.RetryAfter = time.Duration(le.Expires - now)
				break
			}
		}
	}
	res.Remaining = max(limit-inflight, 0)
	res.ResetAfter = leaseResetAfter(leases, now, sorted)
	return LeaseState{Leases: leases}, res, nil
}

// Release returns the lease with identifier id. It reports false when the
// lease is unknown or has lapsed. Expired leases are dropped. The Result
// describes the usage after the release: Allowed is always true, and
// Remaining and ResetAfter are as for Acquire. It may reuse the backing array
// of s.Leases.
func Release(s LeaseState, l Limit, now int64, id uint64) (LeaseState, Result, bool) {
	leases, inflight, sorted, at := dropExpired(s.Leases, now, id)
	if at >= 0 {
		inflight -= leases[at].Cost
		leases = slices.Delete(leases, at, at+1)
	}
	res := Result{
		Allowed:    true,
		Limit:      l.Limit,
		Remaining:  max(l.Limit-inflight, 0),
		ResetAfter: leaseResetAfter(leases, now, sorted),
	}
	return LeaseState{Leases: leases}, res, at >= 0
}

// dropExpired removes, in place and keeping their order, the leases that have
// expired by now. It returns the live leases, the sum of their costs, whether
// they are ordered by Expires and the index of the (first) live lease with
// identifier id, or -1.
func dropExpired(leases []Lease, now int64, id uint64) (live []Lease, inflight int64, sorted bool, at int) {
	live, sorted, at = leases[:0], true, -1
	for _, le := range leases {
		if le.Expires <= now {
			continue
		}
		if n := len(live); n > 0 && live[n-1].Expires > le.Expires {
			sorted = false
		}
		if le.ID == id && at < 0 {
			at = len(live)
		}
		live = append(live, le)
		inflight += le.Cost
	}
	return live, inflight, sorted, at
}

// insertLease adds le after every lease that expires no later than it, so an
// ordered slice stays ordered (in O(1) when leases share one ttl).
func insertLease(leases []Lease, le Lease) []Lease {
	leases = append(leases, le)
	i := len(leases) - 1
	for ; i > 0 && leases[i-1].Expires > le.Expires; i-- {
		leases[i] = leases[i-1]
	}
	leases[i] = le
	return leases
}

// leaseResetAfter is the time from now until every lease has expired. When
// the leases are ordered by Expires, the last one expires last.
func leaseResetAfter(leases []Lease, now int64, sorted bool) time.Duration {
	var last int64
	if sorted && len(leases) > 0 {
		last = leases[len(leases)-1].Expires
	} else {
		for _, le := range leases {
			last = max(last, le.Expires)
		}
	}
	return time.Duration(max(last-now, 0))
}
