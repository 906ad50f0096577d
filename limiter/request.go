package limiter

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
)

// Bounds on requests: with bucket's MaxLimit, MaxPeriod, MaxSlidingLogLimit
// and MaxHitsLimit (checked by bucket.Limit.Validate), these are the bounds
// every API (gRPC, HTTP, Envoy RLS) and the policy file enforce, through
// Check's validation; each violation is a *FieldError naming the field.
const (
	// MaxKeyBytes is the longest key accepted.
	MaxKeyBytes = 1024
	// MaxItems is the most items accepted in one Check call.
	MaxItems = 1000
	// MaxCost bounds a single item's cost, except under fixed_window_hits,
	// which counts any cost (a cost above the limit is counted and denied).
	MaxCost = bucket.MaxLimit
	// DefaultLeaseTTL is the lease lifetime when a request gives none.
	DefaultLeaseTTL = time.Minute
	// MaxLeaseTTL is the longest lease lifetime any configuration
	// accepts (policy.MaxLeaseTTL).
	MaxLeaseTTL = policy.MaxLeaseTTL
	// DefaultMaxLeaseTTL is the longest lease an Acquire may ask for when
	// neither Config.MaxLeaseTTL nor the policy's max_ttl says otherwise:
	// an hour covers a long job or stream held without renewing (the
	// longest TTL clients used before there was a cap), and bounds the
	// slot a crashed or hostile holder keeps to an hour, not a day.
	DefaultMaxLeaseTTL = time.Hour
)

// Sentinel errors. Errors returned by this package wrap one of them.
var (
	// ErrInvalid marks a request that is malformed; it is never retried.
	ErrInvalid = errors.New("limiter: invalid request")
	// ErrUnknownPolicy marks a request that names a policy that is not configured.
	ErrUnknownPolicy = errors.New("limiter: unknown policy")
	// ErrInlineDisabled marks an inline limit where the policy file forbids them.
	ErrInlineDisabled = errors.New("limiter: inline limits are disabled")
)

// Request is one item of a Check: may Key spend Cost units under a limit?
type Request struct {
	// Key is the limited identity, e.g. "user:42"; 1..MaxKeyBytes bytes
	// of valid UTF-8.
	Key string
	// Policy names a configured policy. When empty, Limit applies.
	Policy string
	// Limit is an inline limit, used when Policy is empty.
	Limit bucket.Limit
	// Timezone is the IANA zone name of an inline calendar limit ("" is
	// UTC, or Limit.Zone when that is set): the limiter loads it (cached)
	// into Limit.Zone, and an unknown name is an error naming "timezone".
	Timezone string
	// FailureMode goes with an inline Limit.
	FailureMode policy.FailureMode
	// Trusted marks an inline Limit that comes from this node's own
	// configuration (the Envoy RLS rules), not from the caller: the policy
	// file's allow_inline: false does not refuse it.
	Trusted bool
	// Client is the verified identity of the client (its certificate's,
	// under mTLS), or "" when it has none: a new key counts against the
	// client's cap of live keys (Config.Store.MaxKeysPerClient) on its
	// owner.
	Client string
	// Cost is the number of units to spend; 0 reads usage.
	Cost int64
	// UpTo makes the request a grant (token buckets only, Cost 1 to the
	// limit's capacity): up to Cost units are spent, as many as the bucket
	// has, for a client that answers checks from them itself; the result's
	// Granted says how many. The same as Limiter.Grant, in a batch of
	// checks.
	UpTo bool
}

// AcquireRequest asks for a lease on a concurrency limit.
type AcquireRequest struct {
	Request
	// TTL is the lease lifetime; 0 means DefaultLeaseTTL.
	TTL time.Duration
	// Holder is the verified identity of the client (its certificate's,
	// under mTLS), or "" when it has none: the lease is bound to it, and
	// only a Release with the same Holder returns it.
	Holder string
}

// ReleaseRequest returns a lease.
type ReleaseRequest struct {
	Request
	// LeaseID is the identifier Acquire returned.
	LeaseID string
	// Holder is the verified identity of the client, as in
	// AcquireRequest: a lease bound to another holder is not released.
	Holder string
}

// Source says where an answer came from.
type Source uint8

// Sources of an answer.
const (
	SourceOwner Source = iota + 1
	SourceGrant
	SourceFallback
)

var sourceNames = [...]string{SourceOwner: "owner", SourceGrant: "grant", SourceFallback: "fallback"}

// String returns "owner", "grant" or "fallback".
func (s Source) String() string {
	if int(s) < len(sourceNames) && sourceNames[s] != "" {
		return sourceNames[s]
	}
	return "unknown"
}

// Result is the answer to one Request.
type Result struct {
	bucket.Result
	// Policy is the name of the policy that applied, or "" for an inline limit.
	Policy string
	// Period is the period of the limit that applied.
	Period time.Duration
	// Quota is the limit's units per Period (bucket.Limit.Limit, the
	// sustained rate), and Burst its capacity (bucket.Limit.Capacity: a
	// token bucket's burst, else Quota), as configured; the embedded
	// Result's Limit is the capacity that applied to this answer, which is
	// a node's share of Burst in the fallback.
	Quota, Burst int64
	// Source says where the answer came from.
	Source Source
	// Owner is the name of the node that owns the key.
	Owner string
	// Err is set when the item could not be evaluated (e.g. the store is
	// full: it wraps store.ErrFull). Allowed is then false.
	Err error
	// Granted is what an UpTo request was given (Allowed: some tokens).
	Granted Granted
}

// Lease is the answer to an Acquire.
type Lease struct {
	Result
	// ID identifies the lease for Release; empty when denied.
	ID string
	// ExpiresAfter is the lease's lifetime.
	ExpiresAfter time.Duration
}

// FieldError is a validation error of one item of a request. Field is
// relative to the item ("key", "limit", "period", "burst", "algorithm",
// "cost", "policy", "ttl", "lease_id"); Index is the item's position.
type FieldError struct {
	Index  int
	Field  string
	Reason string
	Err    error
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("item %d: %s: %s", e.Index, e.Field, e.Reason)
}

func (e *FieldError) Unwrap() error { return e.Err }

// tooManyItems reports a Check with more than MaxItems items.
func tooManyItems(n int) error {
	if n == 0 {
		return &FieldError{Index: -1, Field: "items", Reason: "must not be empty", Err: ErrInvalid}
	}
	return &FieldError{Index: -1, Field: "items", Reason: fmt.Sprintf("%d items, at most %d per call", n, MaxItems), Err: ErrInvalid}
}
