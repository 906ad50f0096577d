package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/internal/activity"
	"github.com/sluice-rl/sluice/internal/grant"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// ErrInvalidConfig wraps every error New returns for a Config that fails
// validation; the message names the field, e.g. "limiter: invalid config:
// NodeName: must not be empty".
var ErrInvalidConfig = errors.New("limiter: invalid config")

// Defaults applied by New to zero fields of a Config.
const (
	DefaultPendingTTL   = 30 * time.Second
	DefaultFetchTimeout = 500 * time.Millisecond
	DefaultReportKeys   = 10_000
	// MaxReplicas is the most heirs a key may be copied to.
	MaxReplicas = 3
)

// AutoReplicas is the number of heirs each key has on a ring of n members
// when Config.Replicas is 0: a majority of the copies, ⌊n/2⌋ (at most
// MaxReplicas): 0 for one member, 1 for 2 or 3, 2 for 4 or 5, 3 from 6.
// The owner and its heirs are then ⌊n/2⌋+1 members, so any side of a
// split that holds more than half of the members (the side that can
// agree epochs and remove the others) holds the owner or a copy, for
// rings of up to 7 members: the owner and a first heir both cut off
// from it leave the key to a later heir's copy, not to a fresh count
// (docs/failure.md, "A split").
func AutoReplicas(n int) int { return min(max(n/2, 0), MaxReplicas) }

// autoHeirs is replication.n for Config.Replicas 0: AutoReplicas of
// each ring's member count.
const autoHeirs = -1

// heirsOn returns the heirs per key on a ring of members members.
func (r *replication) heirsOn(members int) int {
	if r.n == autoHeirs {
		return AutoReplicas(members)
	}
	return r.n
}

// Config configures a Limiter. The zero value of an optional field means
// its default.
type Config struct {
	// NodeName names this node in results (Result.Owner) and on the ring;
	// it must match the name SetMembers lists this node under. Required.
	NodeName string
	// Clock returns the current time; nil means time.Now. Tests inject a fake.
	Clock func() time.Time
	// Store configures the node's key store (validated by store.New).
	Store store.Config
	// Ring configures consistent hashing; every node must use the same
	// (validated by ring.New).
	Ring ring.Config
	// Peers reaches the other nodes. Nil is allowed for a node that is a
	// cluster of one (tests, a single process): it decides every key itself,
	// and SetMembers refuses a list that names any other node
	// (ErrInvalidConfig), since their keys could not be reached.
	Peers Peers
	// PendingTTL bounds how long a gained partition waits for its previous
	// owner's handoff before its keys start afresh; 0 means
	// DefaultPendingTTL. Must not be negative.
	PendingTTL time.Duration
	// FetchTimeout bounds a fetch of a key's state from its previous owner;
	// 0 means DefaultFetchTimeout. Must not be negative.
	FetchTimeout time.Duration
	// PeersAuthenticated says that every peer call reaches this node over
	// an authenticated channel (peer mTLS or the cluster secret), so any
	// caller is a node of this cluster, whatever name it gives. A node not
	// yet in a multi-node ring then takes Handoff from any such caller:
	// nodes that saw it join (a restart, a join) hand it their keys before
	// its own ring has them, and its first checks count on their states.
	// Without it (--insecure, or a node alone with no authentication)
	// Handoff has the rule of every peer method: members only.
	PeersAuthenticated bool
	// MaxLeaseTTL is the longest lease an Acquire may ask for under an
	// inline limit or a policy without max_ttl (a policy's max_ttl
	// replaces it); 0 means DefaultMaxLeaseTTL. In (0, MaxLeaseTTL].
	MaxLeaseTTL time.Duration
	// Grants configures local token grants for hot keys.
	Grants GrantConfig
	// ReportKeys bounds the keys whose fallback admissions wait to be
	// reported to their owner (see Reconcile); the oldest are dropped
	// beyond it. 0 means DefaultReportKeys; negative turns reports off.
	ReportKeys int
	// Replicas is how many heirs of each key keep a copy of its state
	// (see replicate.go): 1 to MaxReplicas; 0 means AutoReplicas of each
	// ring's member count (a majority of the copies on any side holding
	// more than half of the members); negative turns replication off. A
	// limiter without Peers replicates nothing. With replication,
	// Store.MaxBytes caps the states and the copies this node holds
	// together: replicas/(1+replicas) of it go to the copies (half of it
	// with 0, as for one heir).
	Replicas int
	// OnChanged, if set, receives the states the store logged as changed
	// since the last Replicate, each time Replicate drains the log (the
	// same states replication sends, and with replication off too): the
	// node's --data-dir writer (internal/persist). It is called from
	// Replicate's goroutine, never a check's; the slice is valid during the
	// call only (the next round reuses it). It may wait when its writer
	// falls behind (that round's copies wait too).
	OnChanged func([]store.Entry)
	// Policies is the initial policy set; nil means no policies and inline
	// limits allowed.
	Policies *policy.Set
	// Registerer receives the limiter's metrics; nil means none are kept.
	Registerer prometheus.Registerer
	// Logger receives cluster events; nil means slog.Default().
	Logger *slog.Logger
	// Activity, if set, receives every check counted in the checks_total
	// metric (the rate of checks and denials, a sample of their keys) for
	// the status page; nil keeps none.
	Activity *activity.Recorder

	// OwnerLease, if set, returns how long this node still holds its
	// owner lease (renewed through a majority of the group of the ring's
	// epochs: the time to the node's epoch.Node.LeaseUntil, on its
	// monotonic clock); 0 or less when it holds none. While it holds
	// none, no key is decided here as its owner: each check is answered
	// from its limit's failure mode, and one forwarded here is answered
	// ErrNoLease (applying nothing) so that its sender falls back
	// (ownerlease.go). Nil means the lease is always held (one process,
	// tests). It is called only when the time last returned has run out
	// on Clock (at most MaxLeaseReading is taken from one call).
	OwnerLease func() time.Duration

	// Epochs on peer calls (epochs.go, issue 31). Epoch, if set, returns
	// the epoch of the ring this node routes by (the last applied epoch of
	// the ring's Raft log, installed in the limiter; 0 until one is): one
	// load per peer call, so it must be cheap (an atomic load). WaitEpoch
	// waits until Epoch() >= e or ctx ends (then ctx's error); required
	// with Epoch. Nil for both: epochs are not used (calls carry epoch 0,
	// and the sender's epoch is ignored).
	Epoch     func() uint64
	WaitEpoch func(ctx context.Context, e uint64) error
	// CatchUpWait bounds how long a peer call from a sender ahead of this
	// node waits for this node to apply the sender's epoch, and how long
	// this node waits to apply the epoch of a receiver that redirected
	// it; 0 means DefaultCatchUpWait. Must not be negative.
	CatchUpWait time.Duration
}

// New validates cfg and builds a Limiter. Errors wrap ErrInvalidConfig
// and name the field.
func New(cfg Config) (*Limiter, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	replicas := cfg.Replicas // heirs per key; autoHeirs: by the ring
	switch {
	case replicas < 0 || cfg.Peers == nil:
		replicas = 0
	case replicas == 0:
		replicas = autoHeirs
	}
	cfg.Store.TrackChanges = replicas != 0 || cfg.OnChanged != nil
	// The memory cap covers the states and their copies: a node holds
	// about replicas copies for each state it owns (one with autoHeirs).
	perState := max(replicas, 1)
	copiesCap := cfg.Store.MaxBytes * int64(perState) / int64(1+perState)
	if replicas == 0 {
		copiesCap = 0
	}
	cfg.Store.MaxBytes -= copiesCap
	st, err := store.New(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("%w: Store: %w", ErrInvalidConfig, err)
	}
	shares, err := store.New(store.Config{})
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	l := &Limiter{name: cfg.NodeName, clock: cfg.Clock, store: st, shares: shares, ringCfg: cfg.Ring, peers: cfg.Peers,
		log: cfg.Logger, pendingTTL: cfg.PendingTTL, fetchTimeout: cfg.FetchTimeout, maxLeaseTTL: cfg.MaxLeaseTTL, maxKeysPerClient: cfg.Store.MaxKeysPerClient,
		peersAuthenticated: cfg.PeersAuthenticated}
	l.repl.tap = cfg.OnChanged
	l.epoch, l.waitEpoch, l.catchUpWait = cfg.Epoch, cfg.WaitEpoch, cfg.CatchUpWait
	if l.catchUpWait == 0 {
		l.catchUpWait = DefaultCatchUpWait
	}
	if l.peers != nil {
		l.peers = suspectGate{Peers: l.peers, l: l}
	}
	if l.clock == nil {
		l.clock = time.Now
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.pendingTTL == 0 {
		l.pendingTTL = DefaultPendingTTL
	}
	if l.fetchTimeout == 0 {
		l.fetchTimeout = DefaultFetchTimeout
	}
	if l.maxLeaseTTL == 0 {
		l.maxLeaseTTL = DefaultMaxLeaseTTL
	}
	l.acks.ttl = l.pendingTTL
	if replicas != 0 {
		l.repl.n = replicas
		l.repl.urgent = make(chan struct{}, 1)
		if l.repl.copies, err = store.New(store.Config{MaxBytes: copiesCap}); err != nil {
			return nil, fmt.Errorf("%w: Store: %w", ErrInvalidConfig, err)
		}
		if l.repl.acting, err = store.New(store.Config{}); err != nil {
			return nil, fmt.Errorf("limiter: %w", err)
		}
	}
	l.grants = grant.NewHolder(cfg.Grants)
	l.credits = newCredits()
	l.ledger.max = 4 * l.grants.Config().MaxKeys
	l.reports.max = cfg.ReportKeys
	if l.reports.max == 0 {
		l.reports.max = DefaultReportKeys
	}
	set := cfg.Policies
	if set == nil {
		set = policy.Empty()
	}
	l.policies.Store(set)
	l.metrics, err = newMetrics(cfg.Registerer, st, set)
	if err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
	}
	l.metrics.activity = cfg.Activity
	l.lease.src = cfg.OwnerLease
	return l, nil
}

// validate checks the fields New does not hand to another package's
// constructor first; errors wrap ErrInvalidConfig and name the field.
func (c *Config) validate() error {
	switch {
	case c.NodeName == "":
		return fmt.Errorf("%w: NodeName: must not be empty", ErrInvalidConfig)
	case c.PendingTTL < 0:
		return fmt.Errorf("%w: PendingTTL: must be >= 0 (0 = %s), got %s", ErrInvalidConfig, DefaultPendingTTL, c.PendingTTL)
	case c.Replicas > MaxReplicas:
		return fmt.Errorf("%w: Replicas: at most %d (0 = by the ring's size, negative = off), got %d", ErrInvalidConfig, MaxReplicas, c.Replicas)
	case c.FetchTimeout < 0:
		return fmt.Errorf("%w: FetchTimeout: must be >= 0 (0 = %s), got %s", ErrInvalidConfig, DefaultFetchTimeout, c.FetchTimeout)
	case c.Epoch != nil && c.WaitEpoch == nil:
		return fmt.Errorf("%w: WaitEpoch: is required with Epoch", ErrInvalidConfig)
	case c.CatchUpWait < 0:
		return fmt.Errorf("%w: CatchUpWait: must be >= 0 (0 = %s), got %s", ErrInvalidConfig, DefaultCatchUpWait, c.CatchUpWait)
	case c.MaxLeaseTTL < 0 || c.MaxLeaseTTL > MaxLeaseTTL:
		return fmt.Errorf("%w: MaxLeaseTTL: must be in [0, %s] (0 = %s), got %s", ErrInvalidConfig, MaxLeaseTTL, DefaultMaxLeaseTTL, c.MaxLeaseTTL)
	}
	// An empty member list checks the ring config without placing anything.
	if _, err := ring.New(c.Ring, nil); err != nil {
		return fmt.Errorf("%w: Ring: %w", ErrInvalidConfig, err)
	}
	return nil
}
