package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/grant"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
)

// Local token grants. A node that does not own a key, and sees many checks
// of it, asks the owner for a batch of tokens (a grant) and answers checks
// from it without a network hop:
//
//   - The owner spends the granted tokens from the bucket at once, so the
//     cluster never admits more than the bucket allows: admitted <= the
//     bucket's bound. A grant's unspent tokens lapse after GrantConfig.TTL,
//     so under-admission is at most the tokens held in unexpired grants,
//     and a grant is spent within TTL of being taken.
//   - A grant holds what this node spends in GrantConfig.Refill at its
//     observed rate, at most capacity/(2 × nodes), so one node cannot
//     starve the others. When it falls below half, one refill is requested
//     in the background, ahead of need; refills of many keys to one owner
//     share RPCs through the peer client's batching.
//   - When the owner has no tokens, the node caches the denial until the
//     owner's retry-after (at least GrantConfig.DenyHold) and denies locally
//     meanwhile; when it has fewer than asked for, the node spends them and
//     then denies locally for DenyHold before asking again, so a saturated
//     key costs each node at most one request per DenyHold.
//   - Grants apply to token buckets only; windows, logs and concurrency
//     limits always go to the owner. Reads (cost 0) also go to the owner.
//   - Per policy, grants are used for keys above GrantConfig.Threshold
//     checks/s at this node (auto, the default), always, or never.

// GrantConfig configures local token grants (see grant.Config).
type GrantConfig = grant.Config

// GrantStats counts grant activity on this node (see grant.Stats).
type GrantStats = grant.Stats

// errOwnHere reports a grant request for a key this node owns by now.
var errOwnHere = errors.New("limiter: key owned here")

// GrantTTL is how long granted tokens may be spent.
func (l *Limiter) GrantTTL() time.Duration { return l.grants.Config().TTL }

// GrantStats returns this node's grant counters.
func (l *Limiter) GrantStats() GrantStats { return l.grants.Stats() }

// useGrant tries to answer j, whose owner is another node, from a grant.
// It reports false when j must go to the owner the usual way.
func (l *Limiter) useGrant(ctx context.Context, v *view, j *job, owner ring.Member, now int64) bool {
	if j.limit.Algorithm != bucket.TokenBucket || j.cost == 0 || j.grants == policy.GrantNever || l.peers == nil {
		return false
	}
	capacity := j.limit.Capacity()
	most := max(1, capacity/int64(2*ringSize(v)))
	hash, lim := j.hash, j.limit
	ask := func(ctx context.Context, want int64) (grant.Reply, error) {
		return l.askOwner(ctx, hash, lim, want)
	}
	out, ok := l.grants.Use(ctx, hash, now, j.cost, capacity, most, j.grants == policy.GrantAlways, ask,
		func() int64 { return l.clock().UnixNano() })
	if !ok {
		return false
	}
	res := j.res
	res.Result = bucket.Result{Allowed: out.Allowed, Limit: capacity, Remaining: out.Remaining,
		ResetAfter: out.ResetAfter, RetryAfter: out.RetryAfter}
	res.Source, res.Owner, res.Err = SourceGrant, owner.Name, nil
	return true
}

// askOwner asks hash's owner for up to want tokens of lim.
func (l *Limiter) askOwner(ctx context.Context, hash uint64, lim bucket.Limit, want int64) (grant.Reply, error) {
	owner, mine := l.route(l.view.Load(), hash)
	if mine {
		return grant.Reply{}, errOwnHere // the key came here meanwhile: decide it locally
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.fetchTimeout)
	defer cancel()
	var ans [1]Answer
	if err := l.peers.Check(rctx, owner, 0, []Forwarded{{Hash: hash, Limit: lim, Cost: want, UpTo: true}}, ans[:]); err != nil {
		return grant.Reply{}, err
	}
	a := ans[0]
	if a.Err != nil {
		return grant.Reply{}, a.Err
	}
	return grant.Reply{Granted: a.Granted, Remaining: a.Remaining, ResetAfter: a.ResetAfter, RetryAfter: a.RetryAfter}, nil
}

// Grant asks the key's owner for up to want tokens of a token bucket, for
// a client that holds grants itself. The owner spends what it grants.
func (l *Limiter) Grant(ctx context.Context, req Request, want int64) (granted int64, res Result, err error) {
	r, err := l.resolve(l.policies.Load(), 0, &req)
	if err != nil {
		return 0, Result{}, err
	}
	if r.limit.Algorithm != bucket.TokenBucket {
		return 0, Result{}, &FieldError{0, "algorithm", "grants take a token bucket, not " + r.limit.Algorithm.String(), ErrInvalid}
	}
	if want <= 0 || want > r.limit.Capacity() {
		return 0, Result{}, &FieldError{0, "want", "must be between 1 and the limit's capacity", ErrInvalid}
	}
	res = Result{Policy: r.policy, Period: r.limit.Period, Quota: r.limit.Limit, Burst: r.limit.Capacity()}
	jobs := []job{{hash: r.hash, limit: r.limit, cost: want, upTo: true, mode: r.mode, res: &res}}
	l.decide(ctx, l.view.Load(), 0, false, jobs, l.clock().UnixNano())
	if res.Err != nil {
		return 0, res, res.Err
	}
	return jobs[0].granted, res, nil
}
