package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
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
	ttl := req.TTL
	switch {
	case ttl < 0:
		return Lease{}, &FieldError{0, "ttl", "must be >= 0", ErrInvalid}
	case ttl == 0:
		ttl = DefaultLeaseTTL
	case ttl > MaxLeaseTTL:
		return Lease{}, &FieldError{0, "ttl", fmt.Sprintf("must be <= %s", MaxLeaseTTL), ErrInvalid}
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

// acquire takes a lease here or on the owner and names who answered.
func (l *Limiter) acquire(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, ttl time.Duration) (Answer, store.LeaseID, string) {
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		_, _ = l.awaitState(ctx, v, it.Hash, "")
		id, res, err := l.store.AcquireFor(it.Hash, it.Limit, l.clock().UnixNano(), it.Cost, ttl, it.Holder)
		return Answer{Result: res, Err: err}, id, l.name
	}
	a, id, err := l.peers.Acquire(ctx, owner, hops, it, ttl)
	if err != nil {
		if hops > 0 && ctx.Err() == nil {
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
		return false, Result{}, &FieldError{0, "lease_id", fmt.Sprintf("malformed lease id %q: want 32 hex digits, as Acquire gave", req.LeaseID), ErrInvalid}
	}
	a, ok, owner := l.release(ctx, l.view.Load(), 0, false, Forwarded{Hash: r.hash, Limit: r.limit, Holder: HolderTag(req.Holder)}, id)
	return ok, Result{Result: a.Result, Err: a.Err, Policy: r.policy, Period: r.limit.Period, Quota: r.limit.Limit, Burst: r.limit.Capacity(), Source: SourceOwner, Owner: owner}, nil
}

// release returns a lease here or on the owner and names who answered.
func (l *Limiter) release(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, id store.LeaseID) (Answer, bool, string) {
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		_, _ = l.awaitState(ctx, v, it.Hash, "")
		id.Holder = it.Holder
		ok, res, err := l.store.Release(it.Hash, it.Limit, l.clock().UnixNano(), id)
		return Answer{Result: res, Err: err}, ok, l.name
	}
	a, ok, err := l.peers.Release(ctx, owner, hops, it, id)
	if err != nil {
		return Answer{Result: bucket.Result{Limit: it.Limit.Capacity()}, Err: err}, false, owner.Name
	}
	return a, ok, owner.Name
}
