package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// ErrSuspect marks a call to a key's owner that was not made because the
// owner is suspect (see SetSuspects). Such an error also wraps
// ErrPeerUnavailable and ErrNotSent.
var ErrSuspect = errors.New("limiter: owner suspect")

// suspects is a set of suspect members by name, with the error a call to
// each fails with. Published whole through Limiter.suspects; nil when no
// member is suspect.
type suspects map[string]error

// SetSuspects replaces the members this node suspects (the node's
// membership reports them: they stopped answering its probes but are
// still on the ring). Calls that decide keys (checks, grant requests,
// leases) to a suspect fail at once with an error wrapping ErrSuspect,
// ErrPeerUnavailable and ErrNotSent, so its keys are answered as for an
// unreachable owner (the heir, acting.go, then the failure mode,
// fallback.go) without spending the caller's deadline on it; keys
// whose state may be on a suspect are still fetched from it (a fetch
// given up loses the state). An empty list ends the suspicion: calls go to
// the owners again. Safe for concurrent use with checks.
func (l *Limiter) SetSuspects(names []string) {
	if len(names) == 0 {
		l.suspects.Store(nil)
		return
	}
	s := make(suspects, len(names))
	for _, name := range names {
		s[name] = fmt.Errorf("%w: %w: %w: %s", ErrPeerUnavailable, ErrNotSent, ErrSuspect, name)
	}
	l.suspects.Store(&s)
}

// Suspects returns the members SetSuspects named last, in no order.
func (l *Limiter) Suspects() []string {
	p := l.suspects.Load()
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(*p))
	for name := range *p {
		out = append(out, name)
	}
	return out
}

// suspected returns the error of a call to member name if it is suspect,
// else nil. With no suspect, it is one atomic load.
func (l *Limiter) suspected(name string) error {
	p := l.suspects.Load()
	if p == nil {
		return nil
	}
	return (*p)[name]
}

// suspectGate is the limiter's Peers: the configured ones, except that
// calls that decide a key (Check, Acquire, Release) to a suspect member
// fail at once. Other calls (fetches and handoffs, which move states)
// pass through.
type suspectGate struct {
	Peers
	l *Limiter
}

// Check fails at once if node to is suspect.
func (g suspectGate) Check(ctx context.Context, to ring.Member, hops int, items []Forwarded, out []Answer) error {
	if err := g.l.suspected(to.Name); err != nil {
		return err
	}
	return g.Peers.Check(ctx, to, hops, items, out)
}

// Acquire fails at once if node to is suspect.
func (g suspectGate) Acquire(ctx context.Context, to ring.Member, hops int, item Forwarded, ttl time.Duration) (Answer, store.LeaseID, error) {
	if err := g.l.suspected(to.Name); err != nil {
		return Answer{}, store.LeaseID{}, err
	}
	return g.Peers.Acquire(ctx, to, hops, item, ttl)
}

// Release fails at once if node to is suspect.
func (g suspectGate) Release(ctx context.Context, to ring.Member, hops int, item Forwarded, leaseID store.LeaseID) (Answer, bool, error) {
	if err := g.l.suspected(to.Name); err != nil {
		return Answer{}, false, err
	}
	return g.Peers.Release(ctx, to, hops, item, leaseID)
}
