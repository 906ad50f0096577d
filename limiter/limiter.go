package limiter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/store"
)

// Config configures a Limiter.
type Config struct {
	// NodeName names this node in results (Result.Owner).
	NodeName string
	// Clock returns the current time; nil means time.Now. Tests inject a fake.
	Clock func() time.Time
	// Store configures the node's key store.
	Store store.Config
	// Policies is the initial policy set; nil means no policies and inline
	// limits allowed.
	Policies *policy.Set
	// Registerer receives the limiter's metrics; nil means none are kept.
	Registerer prometheus.Registerer
}

// Limiter decides checks. It is safe for concurrent use.
type Limiter struct {
	name     string
	clock    func() time.Time
	store    *store.Store
	policies atomic.Pointer[policy.Set]
	metrics  *metrics
}

// New builds a Limiter.
func New(cfg Config) (*Limiter, error) {
	st, err := store.New(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	l := &Limiter{name: cfg.NodeName, clock: cfg.Clock, store: st}
	if l.clock == nil {
		l.clock = time.Now
	}
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

// SetPolicies swaps in a new policy set; checks in flight finish with the old one.
func (l *Limiter) SetPolicies(s *policy.Set) { l.policies.Store(s) }

// Policies returns the policy set in force.
func (l *Limiter) Policies() *policy.Set { return l.policies.Load() }

// Store returns the node's store, for sweeping and stats.
func (l *Limiter) Store() *store.Store { return l.store }

// Sweep drops expired states from the store; the node calls it periodically.
func (l *Limiter) Sweep() int { return l.store.Sweep(l.clock().UnixNano()) }

// resolved is a validated request item.
type resolved struct {
	limit  bucket.Limit
	policy string
	mode   policy.FailureMode
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
		out.limit, out.policy, out.mode = p.Limit, p.Name, p.FailureMode
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
	out.hash = identity(&out, r.Key)
	return out, nil
}

// identity hashes what makes a bucket: the algorithm, the policy name (or,
// for an inline limit, its period) and the key. Two checks share state
// exactly when these agree, so one key can carry layered limits (10/s and
// 1000/h) while a changed limit number keeps the state it had.
func identity(r *resolved, key string) uint64 {
	var d xxhash.Digest
	d.Reset()
	var head [10]byte
	head[0] = byte(r.limit.Algorithm)
	if r.policy != "" {
		head[1] = 'p'
		_, _ = d.Write(head[:2])
		_, _ = d.WriteString(r.policy)
	} else {
		head[1] = 'i'
		p := uint64(r.limit.Period)
		for b := 0; b < 8; b++ {
			head[2+b] = byte(p >> (8 * b))
		}
		_, _ = d.Write(head[:10])
	}
	_, _ = d.Write([]byte{0})
	_, _ = d.WriteString(key)
	return d.Sum64()
}

// Check decides a batch of requests. Every item is validated before any is
// applied: an invalid item fails the whole call with a *FieldError and
// nothing is consumed. Each valid item is then decided on its own. Results
// are appended to out[:0] and returned.
func (l *Limiter) Check(ctx context.Context, reqs []Request, out []Result) ([]Result, error) {
	if len(reqs) == 0 || len(reqs) > MaxItems {
		return out[:0], tooManyItems(len(reqs))
	}
	set := l.policies.Load()
	var small [8]resolved
	rs := small[:0]
	if len(reqs) > len(small) {
		rs = make([]resolved, 0, len(reqs))
	}
	for i := range reqs {
		r, err := l.resolve(set, i, &reqs[i])
		if err != nil {
			return out[:0], err
		}
		if r.limit.Algorithm == bucket.Concurrency && reqs[i].Cost > 0 {
			return out[:0], &FieldError{i, "algorithm", "concurrency limits are taken with Acquire and Release; Check may only read them (cost 0)", ErrInvalid}
		}
		rs = append(rs, r)
	}
	now := l.clock().UnixNano()
	out = out[:0]
	for i := range rs {
		out = append(out, l.take(&rs[i], now, reqs[i].Cost))
	}
	return out, nil
}

// take applies one resolved item to the local store.
func (l *Limiter) take(r *resolved, now, cost int64) Result {
	res := Result{Policy: r.policy, Period: r.limit.Period, Source: SourceOwner, Owner: l.name}
	var err error
	if r.limit.Algorithm == bucket.Concurrency {
		// Cost 0 on a concurrency limit reads the in-flight count.
		_, res.Result, err = l.store.Acquire(r.hash, r.limit, now, 0, time.Second)
	} else {
		res.Result, err = l.store.Take(r.hash, r.limit, now, cost)
	}
	if err != nil {
		res.Err = err
		res.Allowed = false
	}
	l.metrics.observe(r.limit.Algorithm, &res)
	return res
}

// Acquire takes a lease on a concurrency limit.
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
	now := l.clock().UnixNano()
	out := Lease{Result: Result{Policy: r.policy, Period: r.limit.Period, Source: SourceOwner, Owner: l.name}}
	id, res, err := l.store.Acquire(r.hash, r.limit, now, req.Cost, ttl)
	out.Result.Result = res
	if err != nil {
		out.Err, out.Allowed = err, false
	}
	if out.Allowed && id != 0 {
		out.ID = strconv.FormatUint(id, 16)
		out.ExpiresAfter = ttl
	}
	l.metrics.observe(r.limit.Algorithm, &out.Result)
	return out, nil
}

// Release returns a lease. It reports whether the lease was held.
func (l *Limiter) Release(ctx context.Context, req ReleaseRequest) (bool, Result, error) {
	set := l.policies.Load()
	r, err := l.resolve(set, 0, &req.Request)
	if err != nil {
		return false, Result{}, err
	}
	if r.limit.Algorithm != bucket.Concurrency {
		return false, Result{}, &FieldError{0, "algorithm", fmt.Sprintf("Release takes a concurrency limit, not %s", r.limit.Algorithm), ErrInvalid}
	}
	id, err := strconv.ParseUint(req.LeaseID, 16, 64)
	if err != nil || id == 0 {
		return false, Result{}, &FieldError{0, "lease_id", fmt.Sprintf("malformed lease id %q", req.LeaseID), ErrInvalid}
	}
	out := Result{Policy: r.policy, Period: r.limit.Period, Source: SourceOwner, Owner: l.name}
	ok, res, err := l.store.Release(r.hash, r.limit, l.clock().UnixNano(), id)
	out.Result = res
	if err != nil {
		out.Err = err
	}
	return ok, out, nil
}
