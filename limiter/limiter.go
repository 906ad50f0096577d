package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/grant"
	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Config configures a Limiter.
type Config struct {
	// NodeName names this node in results (Result.Owner) and on the ring.
	NodeName string
	// Clock returns the current time; nil means time.Now. Tests inject a fake.
	Clock func() time.Time
	// Store configures the node's key store.
	Store store.Config
	// Ring configures consistent hashing; every node must use the same.
	Ring ring.Config
	// Peers reaches the other nodes; nil means a node that never forwards
	// (SetMembers must then list only this node).
	Peers Peers
	// PendingTTL bounds how long a gained partition waits for its previous
	// owner's handoff before its keys start afresh; 0 means 30s.
	PendingTTL time.Duration
	// FetchTimeout bounds a fetch of a key's state from its previous owner;
	// 0 means 500ms.
	FetchTimeout time.Duration
	// Grants configures local token grants for hot keys.
	Grants GrantConfig
	// Policies is the initial policy set; nil means no policies and inline
	// limits allowed.
	Policies *policy.Set
	// Registerer receives the limiter's metrics; nil means none are kept.
	Registerer prometheus.Registerer
	// Logger receives cluster events; nil means slog.Default().
	Logger *slog.Logger
}

// Limiter decides checks. It is safe for concurrent use.
type Limiter struct {
	name         string
	clock        func() time.Time
	store        *store.Store
	shares       *store.Store // local shares of unreachable owners' limits
	ringCfg      ring.Config
	peers        Peers
	log          *slog.Logger
	pendingTTL   time.Duration
	fetchTimeout time.Duration
	policies     atomic.Pointer[policy.Set]
	view         atomic.Pointer[view]
	moved        movedSet
	recent       recentDone
	fetches      singleflight.Group
	handoffMu    sync.Mutex // serializes HandOff
	leaving      atomic.Bool
	accepting    sync.RWMutex // AcceptHandoff (read) against SetLeaving (write)
	grants       *grant.Holder
	metrics      *metrics
}

// New builds a Limiter.
func New(cfg Config) (*Limiter, error) {
	st, err := store.New(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	shares, err := store.New(store.Config{})
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	l := &Limiter{name: cfg.NodeName, clock: cfg.Clock, store: st, shares: shares, ringCfg: cfg.Ring, peers: cfg.Peers,
		log: cfg.Logger, pendingTTL: cfg.PendingTTL, fetchTimeout: cfg.FetchTimeout}
	if l.clock == nil {
		l.clock = time.Now
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.pendingTTL <= 0 {
		l.pendingTTL = 30 * time.Second
	}
	if l.fetchTimeout <= 0 {
		l.fetchTimeout = 500 * time.Millisecond
	}
	l.recent.ttl = l.pendingTTL
	l.grants = grant.NewHolder(cfg.Grants)
	set := cfg.Policies
	if set == nil {
		set = policy.Empty()
	}
	l.policies.Store(set)
	l.metrics, err = newMetrics(cfg.Registerer, st)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	return l, nil
}

// Close stops the limiter's background work (grant refills) and waits
// for it.
func (l *Limiter) Close() { l.grants.Close() }

// Name returns this node's name.
func (l *Limiter) Name() string { return l.name }

// SetPolicies swaps in a new policy set; checks in flight finish with the old one.
func (l *Limiter) SetPolicies(s *policy.Set) { l.policies.Store(s) }

// Policies returns the policy set in force.
func (l *Limiter) Policies() *policy.Set { return l.policies.Load() }

// Store returns the node's store, for sweeping and stats.
func (l *Limiter) Store() *store.Store { return l.store }

// Ring returns the ring in force, or nil before SetMembers.
func (l *Limiter) Ring() *ring.Ring {
	if v := l.view.Load(); v != nil {
		return v.ring
	}
	return nil
}

// Sweep drops expired states from the store; the node calls it periodically.
func (l *Limiter) Sweep() int {
	now := l.clock().UnixNano()
	l.grants.Sweep(now)
	return l.store.Sweep(now) + l.shares.Sweep(now)
}

// resolved is a validated request item.
type resolved struct {
	limit  bucket.Limit
	policy string
	mode   policy.FailureMode
	grants policy.GrantMode
	hash   uint64
}

// resolve validates one item and derives its identity.
func (l *Limiter) resolve(set *policy.Set, i int, r *Request) (resolved, error) {
	var out resolved
	switch {
	case r.Key == "":
		return out, &FieldError{i, "key", "must not be empty", ErrInvalid}
	case len(r.Key) > MaxKeyBytes:
		return out, &FieldError{i, "key", fmt.Sprintf("%d bytes, at most %d", len(r.Key), MaxKeyBytes), ErrInvalid}
	case r.Cost < 0:
		return out, &FieldError{i, "cost", "must be >= 0", ErrInvalid}
	}
	if r.Policy != "" {
		p, ok := set.Lookup(r.Policy)
		if !ok {
			return out, &FieldError{i, "policy", fmt.Sprintf("unknown policy %q", r.Policy), ErrUnknownPolicy}
		}
		out.limit, out.policy, out.mode, out.grants = p.Limit, p.Name, p.FailureMode, p.Grants
	} else {
		if !set.AllowInline {
			return out, &FieldError{i, "limit", "inline limits are disabled by the policy file; name a policy", ErrInlineDisabled}
		}
		if r.Limit.Burst != 0 && r.Limit.Algorithm != bucket.TokenBucket {
			return out, &FieldError{i, "burst", fmt.Sprintf("only token_bucket has a burst, not %s", r.Limit.Algorithm), ErrInvalid}
		}
		if err := r.Limit.Validate(); err != nil {
			var fe *bucket.FieldError
			if errors.As(err, &fe) {
				return out, &FieldError{i, fe.Field, fe.Reason, ErrInvalid}
			}
			return out, &FieldError{i, "limit", err.Error(), ErrInvalid}
		}
		out.limit, out.mode = r.Limit, r.FailureMode
	}
	if r.Cost > out.limit.Capacity() {
		return out, &FieldError{i, "cost", fmt.Sprintf("%d exceeds the limit's capacity %d", r.Cost, out.limit.Capacity()), ErrInvalid}
	}
	out.hash = bucketIdentity(&out, r.Key)
	return out, nil
}

// bucketIdentity hashes what makes a bucket: the algorithm, the policy name (or,
// for an inline limit, its period) and the key. Two checks share state
// exactly when these agree, so one key can carry layered limits (10/s and
// 1000/h) while a changed limit number keeps the state it had.
func bucketIdentity(r *resolved, key string) uint64 {
	if r.policy != "" {
		return identity.Policy(uint8(r.limit.Algorithm), r.policy, key)
	}
	return identity.Inline(uint8(r.limit.Algorithm), r.limit.Period, key)
}

// Check decides a batch of requests. Every item is validated before any is
// applied: an invalid item fails the whole call with a *FieldError and
// nothing is consumed. Each valid item is then decided on its own, here if
// this node owns its key, else by its owner. Results are appended to
// out[:0] and returned.
func (l *Limiter) Check(ctx context.Context, reqs []Request, out []Result) ([]Result, error) {
	if len(reqs) == 0 || len(reqs) > MaxItems {
		return out[:0], tooManyItems(len(reqs))
	}
	set := l.policies.Load()
	var small [8]job
	jobs := small[:0]
	if len(reqs) > len(small) {
		jobs = make([]job, 0, len(reqs))
	}
	for i := range reqs {
		r, err := l.resolve(set, i, &reqs[i])
		if err != nil {
			return out[:0], err
		}
		if r.limit.Algorithm == bucket.Concurrency && reqs[i].Cost > 0 {
			return out[:0], &FieldError{i, "algorithm", "concurrency limits are taken with Acquire and Release; Check may only read them (cost 0)", ErrInvalid}
		}
		jobs = append(jobs, job{hash: r.hash, limit: r.limit, cost: reqs[i].Cost, mode: r.mode, grants: r.grants})
	}
	out = out[:0]
	for i := range jobs {
		out = append(out, Result{Policy: reqs[i].Policy, Period: jobs[i].limit.Period})
	}
	for i := range jobs {
		jobs[i].res = &out[i]
	}
	l.decide(ctx, l.view.Load(), 0, false, jobs, l.clock().UnixNano())
	l.metrics.observeBatch(out, jobs)
	return out, nil
}

// job is one item being decided; res receives the answer.
type job struct {
	hash  uint64
	limit bucket.Limit
	cost  int64
	mode  policy.FailureMode
	// grants is the limit's grant mode; upTo marks a grant request from
	// another node, and granted receives what it was given.
	grants  policy.GrantMode
	upTo    bool
	granted int64
	owner   ring.Member
	res     *Result
}

// route returns the node that should decide hash, and whether it is this one.
func (l *Limiter) route(v *view, hash uint64) (ring.Member, bool) {
	owner, mine := v.owner(l.name, hash)
	if mine {
		if to, ok := l.moved.get(hash); ok {
			return to, false
		}
	}
	return owner, mine
}

// decide answers jobs: those this node owns here, the others through their
// owners. forceLocal applies every job here (a forwarded item whose hop
// budget is spent).
func (l *Limiter) decide(ctx context.Context, v *view, hops int, forceLocal bool, jobs []job, now int64) {
	var remote []*job
	for i := range jobs {
		j := &jobs[i]
		owner, mine := l.route(v, j.hash)
		if mine || forceLocal || l.peers == nil {
			l.applyLocal(ctx, v, j, now)
			continue
		}
		if hops == 0 && !j.upTo && l.useGrant(ctx, v, j, owner, now) {
			continue
		}
		j.owner = owner
		remote = append(remote, j)
	}
	if len(remote) > 0 {
		l.forward(ctx, v, hops, remote, now)
	}
}

// applyLocal decides one job on this node's store, first fetching the key's
// state from its previous owner if it may still be on its way.
func (l *Limiter) applyLocal(ctx context.Context, v *view, j *job, now int64) {
	l.awaitState(ctx, v, j.hash)
	res := j.res
	res.Source, res.Owner, res.Err = SourceOwner, l.name, nil
	var err error
	switch {
	case j.upTo:
		j.granted, res.Result, err = l.store.TakeUpTo(j.hash, j.limit, now, j.cost)
	case j.limit.Algorithm == bucket.Concurrency:
		// Cost 0 on a concurrency limit reads the in-flight count.
		_, res.Result, err = l.store.Acquire(j.hash, j.limit, now, 0, time.Second)
	default:
		res.Result, err = l.store.Take(j.hash, j.limit, now, j.cost)
	}
	if err != nil {
		res.Err, res.Allowed = err, false
	}
}

// forward sends jobs to their owners, one concurrent call per owner, and
// reroutes those whose owner changed if a call fails.
func (l *Limiter) forward(ctx context.Context, v *view, hops int, jobs []*job, now int64) {
	groups := groupByOwner(jobs)
	if len(groups) == 1 {
		l.forwardGroup(ctx, v, hops, groups[0], now)
		return
	}
	done := make(chan struct{}, len(groups)-1)
	for _, g := range groups[1:] {
		go func() {
			l.forwardGroup(ctx, v, hops, g, now)
			done <- struct{}{}
		}()
	}
	l.forwardGroup(ctx, v, hops, groups[0], now)
	for range groups[1:] {
		<-done
	}
}

// groupByOwner splits jobs by owner, keeping their order within a group.
func groupByOwner(jobs []*job) [][]*job {
	if len(jobs) == 1 {
		return [][]*job{jobs}
	}
	var groups [][]*job
	idx := map[string]int{}
	for _, j := range jobs {
		g, ok := idx[j.owner.Name]
		if !ok {
			g = len(groups)
			idx[j.owner.Name] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], j)
	}
	return groups
}

// forwardGroup sends jobs that share an owner in one call.
func (l *Limiter) forwardGroup(ctx context.Context, v *view, hops int, jobs []*job, now int64) {
	owner := jobs[0].owner
	items := make([]Forwarded, len(jobs))
	answers := make([]Answer, len(jobs))
	for i, j := range jobs {
		items[i] = Forwarded{Hash: j.hash, Limit: j.limit, Cost: j.cost, UpTo: j.upTo}
	}
	err := l.peers.Check(ctx, owner, hops, items, answers)
	l.metrics.forwarded.Add(float64(len(jobs)))
	if err == nil {
		for i, j := range jobs {
			res := j.res
			res.Result, res.Err, res.Source, res.Owner = answers[i].Result, answers[i].Err, SourceOwner, owner.Name
			j.granted = answers[i].Granted
			if res.Err != nil {
				res.Allowed = false
			}
		}
		return
	}
	// The owner did not answer. If the ring has moved on meanwhile (the
	// owner left), decide again with the new ring; otherwise report it.
	if nv := l.view.Load(); nv != v {
		retry := make([]job, 0, len(jobs))
		for _, j := range jobs {
			if o, _ := l.route(nv, j.hash); o.Name != owner.Name {
				retry = append(retry, *j)
			} else {
				l.unreachable(ctx, nv, hops, j, owner, err, now)
			}
		}
		if len(retry) > 0 {
			l.decide(ctx, nv, hops, false, retry, now)
		}
		return
	}
	for _, j := range jobs {
		l.unreachable(ctx, v, hops, j, owner, err, now)
	}
}

// unreachable answers a job whose owner could not be reached. A node that
// was itself forwarded the job (hops > 0) decides it here: the sender
// already counted it as the owner. Otherwise the limit's failure mode
// answers (see fallback.go). Context errors are the caller's, not the
// owner's: they are reported as such.
func (l *Limiter) unreachable(ctx context.Context, v *view, hops int, j *job, owner ring.Member, err error, now int64) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		res := j.res
		res.Result = bucket.Result{Limit: j.limit.Capacity()}
		res.Source, res.Owner, res.Err = SourceOwner, owner.Name, ctxErr
		return
	}
	if hops > 0 {
		l.applyLocal(ctx, v, j, now)
		return
	}
	if j.upTo {
		// A client's grant request: grant nothing rather than spend a
		// local share; the client then checks the usual way.
		res := j.res
		res.Result = bucket.Result{Limit: j.limit.Capacity()}
		res.Source, res.Owner, res.Err = SourceFallback, owner.Name, err
		return
	}
	l.fallback(v, j, owner, err, now)
}

// awaitState makes sure that, if hash's partition was just gained from
// another node and its state has not arrived yet, it is fetched from that
// node before this one decides on it. Concurrent checks of one key share
// one fetch.
func (l *Limiter) awaitState(ctx context.Context, v *view, hash uint64) {
	if v == nil || v.pending == nil || l.peers == nil {
		return
	}
	from, ok := v.pending.source(v.ring.Partition(hash), hash)
	if !ok {
		return
	}
	_, _, _ = l.fetches.Do(strconv.FormatUint(hash, 16), func() (any, error) {
		if _, ok := v.pending.source(v.ring.Partition(hash), hash); !ok {
			return nil, nil // settled while this call waited its turn
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.fetchTimeout)
		defer cancel()
		entries, err := l.peers.Fetch(fctx, from, []uint64{hash})
		if err != nil {
			l.log.Warn("previous owner unreachable; its keys start afresh here", "from", from.Name, "err", err)
			v.pending.giveUp(from.Name)
			return nil, err
		}
		now := l.clock().UnixNano()
		for _, e := range entries {
			if err := l.store.Import(e, now); err != nil {
				l.log.Warn("fetched state refused", "from", from.Name, "err", err)
			}
		}
		v.pending.settle(hash)
		return nil, nil
	})
}

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
	a, id, owner := l.acquire(ctx, v, 0, false, Forwarded{Hash: r.hash, Limit: r.limit, Cost: req.Cost}, ttl)
	out := Lease{Result: Result{Result: a.Result, Err: a.Err, Policy: r.policy, Period: r.limit.Period, Source: SourceOwner, Owner: owner}}
	if out.Err != nil && errors.Is(out.Err, ErrPeerUnavailable) && ctx.Err() == nil {
		res, fid := l.fallbackAcquire(v, &r, req.Cost, ttl, l.clock().UnixNano())
		out.Result.Result, out.Err, out.Source = res, nil, SourceFallback
		l.metrics.fellBack(r.mode)
		if fid != "" {
			out.ID, out.ExpiresAfter = fid, ttl
		}
		l.metrics.observe(r.limit.Algorithm, &out.Result)
		return out, nil
	}
	if out.Err != nil {
		out.Allowed = false
	}
	if out.Allowed && id != 0 {
		out.ID = strconv.FormatUint(id, 16)
		out.ExpiresAfter = ttl
	}
	l.metrics.observe(r.limit.Algorithm, &out.Result)
	return out, nil
}

// acquire takes a lease here or on the owner and names who answered.
func (l *Limiter) acquire(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, ttl time.Duration) (Answer, uint64, string) {
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		l.awaitState(ctx, v, it.Hash)
		id, res, err := l.store.Acquire(it.Hash, it.Limit, l.clock().UnixNano(), it.Cost, ttl)
		return Answer{Result: res, Err: err}, id, l.name
	}
	a, id, err := l.peers.Acquire(ctx, owner, hops, it, ttl)
	if err != nil {
		if hops > 0 && ctx.Err() == nil {
			return l.acquire(ctx, v, hops, true, it, ttl)
		}
		return Answer{Result: bucket.Result{Limit: it.Limit.Capacity()}, Err: err}, 0, owner.Name
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
		ok, res, err := l.shares.Release(r.hash, LocalShare(r.limit, ringSize(l.view.Load())), l.clock().UnixNano(), fid)
		return ok, Result{Result: res, Err: err, Policy: r.policy, Period: r.limit.Period, Source: SourceFallback, Owner: l.name}, nil
	}
	id, err := strconv.ParseUint(req.LeaseID, 16, 64)
	if err != nil || id == 0 {
		return false, Result{}, &FieldError{0, "lease_id", fmt.Sprintf("malformed lease id %q", req.LeaseID), ErrInvalid}
	}
	a, ok, owner := l.release(ctx, l.view.Load(), 0, false, Forwarded{Hash: r.hash, Limit: r.limit}, id)
	return ok, Result{Result: a.Result, Err: a.Err, Policy: r.policy, Period: r.limit.Period, Source: SourceOwner, Owner: owner}, nil
}

// release returns a lease here or on the owner and names who answered.
func (l *Limiter) release(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, id uint64) (Answer, bool, string) {
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		l.awaitState(ctx, v, it.Hash)
		ok, res, err := l.store.Release(it.Hash, it.Limit, l.clock().UnixNano(), id)
		return Answer{Result: res, Err: err}, ok, l.name
	}
	a, ok, err := l.peers.Release(ctx, owner, hops, it, id)
	if err != nil {
		return Answer{Result: bucket.Result{Limit: it.Limit.Capacity()}, Err: err}, false, owner.Name
	}
	return a, ok, owner.Name
}
