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
//     and a grant is spent within TTL of being taken. A grant that ends
//     early (the key moves, the holder leaves or stops needing it) gives
//     its unspent tokens back (grantreturn.go).
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
	v := l.view.Load()
	owner, mine := l.route(v, hash)
	if mine {
		return grant.Reply{}, errOwnHere // the key came here meanwhile: decide it locally
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.fetchTimeout)
	defer cancel()
	var ans [1]Answer
	err := l.peers.Check(rctx, owner, 0, []Forwarded{{Hash: hash, Limit: lim, Cost: want, UpTo: true}}, ans[:])
	if nv := l.redirected(rctx, v, 0, err); nv != nil {
		// The epoch's redirect (epochs.go): once, to the owner on the new
		// ring, as a second hop.
		if owner, mine = l.route(nv, hash); mine {
			return grant.Reply{}, errOwnHere
		}
		err = l.peers.Check(rctx, owner, 1, []Forwarded{{Hash: hash, Limit: lim, Cost: want, UpTo: true}}, ans[:])
	}
	if err != nil {
		return grant.Reply{}, err
	}
	a := ans[0]
	if a.Err != nil {
		return grant.Reply{}, a.Err
	}
	r := grant.Reply{Granted: a.Granted, Remaining: a.Remaining, ResetAfter: a.ResetAfter, RetryAfter: a.RetryAfter}
	if a.GrantID != 0 && a.Issuer != "" {
		id, issuer := a.GrantID, a.Issuer
		r.Issuer = issuer
		r.Return = func(ctx context.Context, n int64) error {
			_, err := l.returnGrant(ctx, hash, lim, issuer, id, n)
			return err
		}
	}
	return r, nil
}

// Granted is what a grant gave: Tokens, and the ID its Issuer recorded it
// under, for ReturnGrant (0: it cannot be returned).
type Granted struct {
	Tokens int64
	ID     uint64
	Issuer string
}

// Grant asks the key's owner for up to want tokens of a token bucket, for
// a client that holds grants itself. The owner spends what it grants.
func (l *Limiter) Grant(ctx context.Context, req Request, want int64) (Granted, Result, error) {
	r, err := l.resolveGrant(&req, want, "want")
	if err != nil {
		return Granted{}, Result{}, err
	}
	res := Result{Policy: r.policy, Period: r.limit.Period, Quota: r.limit.Limit, Burst: r.limit.Capacity()}
	jobs := []job{{hash: r.hash, limit: r.limit, cost: want, upTo: true, mode: r.mode, inline: r.inline(), client: HolderTag(req.Client), res: &res}}
	l.decide(ctx, l.view.Load(), 0, false, jobs, l.clock().UnixNano())
	if res.Err != nil {
		return Granted{}, res, res.Err
	}
	return Granted{Tokens: jobs[0].granted, ID: jobs[0].grantID, Issuer: jobs[0].issuer}, res, nil
}

// ReturnGrant gives n unspent tokens of a client's grant back to its
// issuer, which credits at most what it granted under id, once, before
// the grant's TTL ends. It returns the tokens credited.
func (l *Limiter) ReturnGrant(ctx context.Context, req Request, g Granted) (int64, error) {
	r, err := l.resolveGrant(&req, g.Tokens, "want")
	if err != nil {
		return 0, err
	}
	if g.ID == 0 {
		return 0, &FieldError{0, "return_grant", "must be a grant id that Grant gave", ErrInvalid}
	}
	if g.Issuer == "" {
		return 0, &FieldError{0, "issuer", "must be the issuer that Grant named", ErrInvalid}
	}
	return l.returnGrant(ctx, r.hash, r.limit, g.Issuer, g.ID, g.Tokens)
}

// resolveGrant resolves the request of a grant or a return of n tokens.
func (l *Limiter) resolveGrant(req *Request, n int64, field string) (resolved, error) {
	r, err := l.resolve(l.policies.Load(), 0, req)
	if err != nil {
		return r, err
	}
	return r, grantValid(0, r.limit, n, "algorithm", field)
}
