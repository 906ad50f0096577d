package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/store"
)

// Acquire takes a lease on a concurrency limit, on the key's owner.
func (l *Limiter) Acquire(ctx context.Context, req AcquireRequest) (Lease, error) {
	set := l.policies.Load()
	r, err := l.resolve(set, 0, &req.Request)
	if err != nil {
		return Lease{}, err
	}
	if r.limit.Algorithm != bucket.Concurrency {
		return Lease{}, &FieldError{0, "algorithm", fmt.Sprintf("Acquire takes a concurrency limit, not %s", r.limit.Algorithm), ErrInvalid}
	}
	ttl, err := l.leaseTTL(&r, req.TTL)
	if err != nil {
		return Lease{}, err
	}
	v := l.view.Load()
	a, id, owner := l.acquire(ctx, v, 0, false, Forwarded{Hash: r.hash, Limit: r.limit, Cost: req.Cost, Holder: HolderTag(req.Holder)}, ttl)
	out := Lease{Result: Result{Result: a.Result, Err: a.Err, Policy: r.policy, Period: r.limit.Period, Quota: r.limit.Limit, Burst: r.limit.Capacity(), Source: SourceOwner, Owner: owner}}
	if out.Err != nil && errors.Is(out.Err, ErrPeerUnavailable) && ctx.Err() == nil {
		res, fid := l.fallbackAcquire(v, &r, req.Cost, ttl, HolderTag(req.Holder), l.clock().UnixNano())
		out.Result.Result, out.Err, out.Source = res, nil, SourceFallback
		l.metrics.fellBack(r.mode)
		if fid != "" {
			out.ID, out.ExpiresAfter = fid, ttl
		}
		l.metrics.observe(&req.Request, r.hash, r.limit.Algorithm, &out.Result)
		return out, nil
	}
	if out.Err != nil {
		out.Allowed = false
	}
	if out.Allowed && !id.IsZero() {
		out.ID = id.String()
		out.ExpiresAfter = ttl
	}
	l.metrics.observe(&req.Request, r.hash, r.limit.Algorithm, &out.Result)
	return out, nil
}

// leaseTTL is the lifetime of a lease asked for with ttl under r: 0 means
// DefaultLeaseTTL (or the cap, when shorter); a ttl beyond the cap (the
// policy's max_ttl, else the node's MaxLeaseTTL) is refused, naming it.
func (l *Limiter) leaseTTL(r *resolved, ttl time.Duration) (time.Duration, error) {
	limit, by := l.maxLeaseTTL, "the node's max lease TTL (sluice serve --max-lease-ttl)"
	if r.maxTTL > 0 {
		limit, by = r.maxTTL, "the max_ttl of policy "+r.policy
	}
	switch {
	case ttl < 0:
		return 0, &FieldError{0, "ttl", "must be >= 0", ErrInvalid}
	case ttl == 0:
		return min(DefaultLeaseTTL, limit), nil
	case ttl > limit:
		return 0, &FieldError{0, "ttl", fmt.Sprintf("%s exceeds %s, %s", ttl, by, limit), ErrInvalid}
	}
	return ttl, nil
}

// acquire takes a lease here or on the owner and names who answered.
func (l *Limiter) acquire(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, ttl time.Duration) (Answer, store.LeaseID, string) {
	forceLocal = forceLocal && !l.leavingForwards(v, hops)
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		var id store.LeaseID
		a, name, nv := l.leaseLocal(ctx, v, mine, it, func(now int64) (bucket.Result, error) {
			var res bucket.Result
			var err error
			id, res, err = l.store.AcquireFor(it.Hash, it.Limit, now, it.Cost, ttl, it.Holder)
			return res, err
		})
		if nv != nil {
			return l.acquire(ctx, nv, hops, forceLocal, it, ttl)
		}
		return a, id, name
	}
	a, id, err := l.peers.Acquire(ctx, owner, hops, it, ttl)
	if err != nil {
		if nv := l.redirected(ctx, v, hops, err); nv != nil {
			return l.acquire(ctx, nv, hops+1, false, it, ttl) // the epoch's redirect (epochs.go)
		}
		if hops > 0 && ctx.Err() == nil {
			if l.outOfRing(v) {
				// Leaving: the sender falls back rather than this node
				// count the key afresh (see leavingForwards).
				err = fmt.Errorf("%w (%w)", ErrStateElsewhere, err)
				return Answer{Result: bucket.Result{Limit: it.Limit.Capacity()}, Err: err}, store.LeaseID{}, owner.Name
			}
			return l.acquire(ctx, v, hops, true, it, ttl)
		}
		return Answer{Result: bucket.Result{Limit: it.Limit.Capacity()}, Err: err}, store.LeaseID{}, owner.Name
	}
	return a, id, owner.Name
}

// Release returns a lease on the key's owner. It reports whether the lease
// was held.
func (l *Limiter) Release(ctx context.Context, req ReleaseRequest) (bool, Result, error) {
	set := l.policies.Load()
	r, err := l.resolve(set, 0, &req.Request)
	if err != nil {
		return false, Result{}, err
	}
	if r.limit.Algorithm != bucket.Concurrency {
		return false, Result{}, &FieldError{0, "algorithm", fmt.Sprintf("Release takes a concurrency limit, not %s", r.limit.Algorithm), ErrInvalid}
	}
	if fid, ok := fallbackLease(req.LeaseID); ok {
		fid.Holder = HolderTag(req.Holder)
		ok, res, err := l.shares.Release(r.hash, LocalShare(r.limit, ringSize(l.view.Load())), l.clock().UnixNano(), fid)
		return ok, Result{Result: res, Err: err, Policy: r.policy, Period: r.limit.Period, Quota: r.limit.Limit, Burst: r.limit.Capacity(), Source: SourceFallback, Owner: l.name}, nil
	}
	id, err := store.ParseLeaseID(req.LeaseID)
	if err != nil {
		return false, Result{}, &FieldError{0, "lease_id", "malformed lease id " + policy.Echo(req.LeaseID) + ": want 32 hex digits, as Acquire gave", ErrInvalid}
	}
	a, ok, owner := l.release(ctx, l.view.Load(), 0, false, Forwarded{Hash: r.hash, Limit: r.limit, Holder: HolderTag(req.Holder)}, id)
	return ok, Result{Result: a.Result, Err: a.Err, Policy: r.policy, Period: r.limit.Period, Quota: r.limit.Limit, Burst: r.limit.Capacity(), Source: SourceOwner, Owner: owner}, nil
}

// release returns a lease here or on the owner and names who answered.
func (l *Limiter) release(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, id store.LeaseID) (Answer, bool, string) {
	forceLocal = forceLocal && !l.leavingForwards(v, hops)
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		var ok bool
		a, name, nv := l.leaseLocal(ctx, v, mine, it, func(now int64) (bucket.Result, error) {
			var res bucket.Result
			var err error
			id.Holder = it.Holder
			ok, res, err = l.store.Release(it.Hash, it.Limit, now, id)
			return res, err
		})
		if nv != nil {
			return l.release(ctx, nv, hops, forceLocal, it, id)
		}
		return a, ok, name
	}
	a, ok, err := l.peers.Release(ctx, owner, hops, it, id)
	if err != nil {
		if nv := l.redirected(ctx, v, hops, err); nv != nil {
			return l.release(ctx, nv, hops+1, false, it, id) // the epoch's redirect (epochs.go)
		}
		return Answer{Result: bucket.Result{Limit: it.Limit.Capacity()}, Err: err}, false, owner.Name
	}
	return a, ok, owner.Name
}

// leaseLocal takes or returns a lease (apply) on this node's store, on
// the same terms as a check decided here (applyLocal): once the key's
// state is here (awaitState), under the key's stripe, on the view in
// force, unless the key was fetched away meanwhile. If the state may be
// on a node that will not give it (or this node is leaving and lacks it),
// it applies nothing and answers ErrStateElsewhere, so that the caller
// falls back to its local share rather than count the key afresh beside
// that state. If the view changed, or the key was fetched away, it
// applies nothing and returns the view to route again on (having passed
// on to a new owner what a fetch brought here).
func (l *Limiter) leaseLocal(ctx context.Context, v *view, routedMine bool, it Forwarded, apply func(now int64) (bucket.Result, error)) (Answer, string, *view) {
	none := bucket.Result{Limit: it.Limit.Capacity()}
	if holder, err := l.awaitState(ctx, v, it.Hash, ""); err != nil {
		if !errors.Is(err, ErrStateElsewhere) {
			err = fmt.Errorf("%w (%w)", ErrStateElsewhere, err)
		}
		return Answer{Result: none, Err: err}, holder.Name, nil
	}
	if beforeTake != nil {
		beforeTake(l)
	}
	st := l.deciding.of(it.Hash)
	st.RLock()
	if nv := l.view.Load(); nv != v {
		st.RUnlock()
		if owner, _, err := l.passOnMoved(ctx, v, nv, it.Hash); err != nil {
			return Answer{Result: none, Err: fmt.Errorf("%w (%w)", ErrStateElsewhere, err)}, owner.Name, nil
		}
		return Answer{}, "", nv
	}
	defer st.RUnlock()
	if routedMine && l.moved.n.Load() > 0 && l.fetchedAway(v, it.Hash) {
		return Answer{}, "", v
	}
	if err := ctx.Err(); err != nil {
		return Answer{Result: none, Err: err}, l.name, nil
	}
	now := l.clock().UnixNano()
	if err := l.ownerGate(v, it.Hash, now); err != nil {
		return Answer{Result: none, Err: err}, l.name, nil
	}
	res, err := apply(now)
	return Answer{Result: res, Err: err}, l.name, nil
}
