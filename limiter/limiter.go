package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/singleflight"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/grant"
	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Limiter decides checks. It is safe for concurrent use.
type Limiter struct {
	smallJobs    sync.Pool // of *[smallBatch]job, for Check
	name         string
	clock        func() time.Time
	store        *store.Store
	shares       *store.Store // local shares of unreachable owners' limits
	ringCfg      ring.Config
	peers        Peers                    // Config.Peers behind suspectGate, or nil
	suspects     atomic.Pointer[suspects] // nil when no member is suspect (suspect.go)
	lease        ownerLease               // Config.OwnerLease and its last reading (ownerlease.go)
	deadWaits    deadWaits                // departed members' dead waits (ownerlease.go)
	log          *slog.Logger
	pendingTTL   time.Duration
	fetchTimeout time.Duration
	maxLeaseTTL  time.Duration
	// maxKeysPerClient: Config.Store.MaxKeysPerClient, for its error.
	maxKeysPerClient int64
	// peersAuthenticated: Config.PeersAuthenticated (admitsHandoff).
	peersAuthenticated bool
	policies           atomic.Pointer[policy.Set]
	view               atomic.Pointer[view]
	deciding           deciding // decisions (read) against view swaps (write): see deciding.go
	moved              movedSet
	departed           departedSet // members of earlier rings, for a while (see checkPeer)
	acks               acks
	passing            keySet  // keys being passed on (see passOn)
	adopted            keySet  // keys handed here by their owner on this ring (see passOn)
	transit            transit // states on their way to their owner (see transit.go)
	fetches            singleflight.Group
	handoffMu          sync.Mutex // serializes HandOff
	leaving            atomic.Bool
	accepting          sync.RWMutex // AcceptHandoff (read) against SetLeaving (write)
	adopting           sync.RWMutex // AcceptHandoff with states (read) against HandOff's acknowledgements (write)
	grants             *grant.Holder
	ledger             grantLedger // the grants this node issued (see grantreturn.go)
	credits            *credits    // credits of returned grants, applied in the background (credits.go)
	reports            reports     // fallback admissions to report (see reconcile.go)
	repl               replication // copies of states for heirs (see replicate.go)
	metrics            *metrics
	zones              bucket.Zones // inline calendar limits' zones (Request.Timezone)
	// Config.Epoch, WaitEpoch (nil: no epochs) and CatchUpWait (epochs.go).
	epoch       func() uint64
	waitEpoch   func(ctx context.Context, e uint64) error
	catchUpWait time.Duration
}

// Close stops the limiter's background work (grant refills, credits of
// returned grants) and waits for it.
func (l *Limiter) Close() {
	l.credits.close()
	l.grants.Close()
}

// Name returns this node's name.
func (l *Limiter) Name() string { return l.name }

// SetPolicies swaps in a new policy set; checks in flight finish with the
// old one. The checks_total rows follow its names.
func (l *Limiter) SetPolicies(s *policy.Set) {
	l.policies.Store(s)
	l.metrics.setPolicies(s)
}

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
	l.ledger.sweep(now)
	l.returnIdleGrants(now)
	n := l.store.Sweep(now) + l.shares.Sweep(now)
	if l.repl.copies != nil {
		n += l.repl.copies.Sweep(now) + l.repl.acting.Sweep(now)
	}
	return n
}

// resolved is a validated request item.
type resolved struct {
	limit  bucket.Limit
	policy string
	mode   policy.FailureMode
	grants policy.GrantMode
	maxTTL time.Duration // the policy's max_ttl; 0 for none
	hash   uint64
}

// inline reports whether r's limit is inline (the client's), not a named
// policy's: its key may be evicted when the store is full.
func (r *resolved) inline() bool { return r.policy == "" }

// resolve validates one item and derives its identity.
func (l *Limiter) resolve(set *policy.Set, i int, r *Request) (resolved, error) {
	var out resolved
	switch {
	case r.Key == "":
		return out, &FieldError{i, "key", "must not be empty", ErrInvalid}
	case len(r.Key) > MaxKeyBytes:
		return out, &FieldError{i, "key", fmt.Sprintf("%d bytes, at most %d", len(r.Key), MaxKeyBytes), ErrInvalid}
	case !utf8.ValidString(r.Key):
		// Keys are text: an API that decodes them (JSON) would turn
		// invalid bytes into U+FFFD, making distinct keys one bucket.
		return out, &FieldError{i, "key", "must be valid UTF-8", ErrInvalid}
	case r.Cost < 0:
		return out, &FieldError{i, "cost", "must be >= 0", ErrInvalid}
	}
	if r.Policy != "" {
		if len(r.Policy) > policy.MaxNameLen {
			return out, &FieldError{i, "policy", fmt.Sprintf("%d bytes, at most %d", len(r.Policy), policy.MaxNameLen), ErrUnknownPolicy}
		}
		p, ok := set.Lookup(r.Policy)
		if !ok {
			return out, &FieldError{i, "policy", "unknown policy " + policy.Echo(r.Policy), ErrUnknownPolicy}
		}
		out.limit, out.policy, out.mode, out.grants, out.maxTTL = p.Limit, p.Name, p.FailureMode, p.Grants, p.MaxTTL
	} else {
		if !set.AllowInline && !r.Trusted {
			return out, &FieldError{i, "limit", "inline limits are disabled by the policy file; name a policy", ErrInlineDisabled}
		}
		lim := r.Limit
		if r.Timezone != "" {
			loc, err := l.zones.Load(r.Timezone)
			if err != nil {
				return out, &FieldError{i, "timezone", "unknown time zone " + policy.Echo(r.Timezone) + ": want an IANA name such as Europe/Berlin, or UTC", ErrInvalid}
			}
			lim.Zone = loc
		}
		if lim.Burst != 0 && lim.Algorithm != bucket.TokenBucket {
			return out, &FieldError{i, "burst", fmt.Sprintf("only token_bucket has a burst, not %s", lim.Algorithm), ErrInvalid}
		}
		if err := lim.Validate(); err != nil {
			var fe *bucket.FieldError
			if errors.As(err, &fe) {
				return out, &FieldError{i, fe.Field, fe.Reason, ErrInvalid}
			}
			return out, &FieldError{i, "limit", err.Error(), ErrInvalid}
		}
		out.limit, out.mode = lim, r.FailureMode
	}
	if r.Cost > out.limit.Capacity() && out.limit.Algorithm != bucket.FixedWindowHits {
		return out, &FieldError{i, "cost", fmt.Sprintf("%d exceeds the limit's capacity %d", r.Cost, out.limit.Capacity()), ErrInvalid}
	}
	out.hash = bucketIdentity(&out, r.Key)
	if out.limit.IsQuota() {
		// A token bucket with a calendar is a quota, which is a fixed
		// window of calendar periods (bucket.Limit.Calendar): from here on
		// (store, grants, fallback, forwarding) it is one. Its identity
		// above keeps the algorithm it was asked with.
		out.limit.Algorithm = bucket.FixedWindow
	}
	return out, nil
}

// bucketIdentity hashes what makes a bucket: the algorithm, the policy name (or,
// for an inline limit, its period, or its calendar and zone) and the key. Two checks share state
// exactly when these agree, so one key can carry layered limits (10/s and
// 1000/h) while a changed limit number keeps the state it had.
func bucketIdentity(r *resolved, key string) uint64 {
	if r.policy != "" {
		return identity.Policy(uint8(r.limit.Algorithm), r.policy, key)
	}
	if r.limit.Calendar != bucket.NoCalendar {
		return identity.Calendar(uint8(r.limit.Algorithm), uint8(r.limit.Calendar), r.limit.Zone.String(), key)
	}
	return identity.Inline(uint8(r.limit.Algorithm), r.limit.Period, key)
}
