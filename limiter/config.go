package limiter

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/internal/grant"
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
