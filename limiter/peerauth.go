package limiter

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/ring"
)

// ErrNotMember is the error of a peer call (CheckForwarded, Fetch, Handoff,
// ...) whose caller is not a member of this node's ring: not a node this
// node would forward to or take state from. transport answers it with
// PermissionDenied. The authentication of the caller itself is the peer
// listener's (mTLS); this check stops a caller that names a node the ring
// does not know, or this node itself.
var ErrNotMember = errors.New("limiter: caller is not a member of this node's ring")

// departedSet remembers the members of earlier rings that have left, for a
// while (the pending TTL): a node that leaves gossip first, then hands off
// its keys and forwards for a few more seconds, stays a legitimate sender of
// peer calls until then.
type departedSet struct {
	mu    sync.Mutex
	until map[string]departed
}

// departed is a member that left the ring, and until when it counts.
type departed struct {
	m     ring.Member
	until time.Time
}

// note records the members of old that are not in r as departed until
// deadline, and forgets the ones that are back in r or have expired.
func (d *departedSet) note(old, r *ring.Ring, now, deadline time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, t := range d.until {
		if _, back := r.Member(name); back || now.After(t.until) {
			delete(d.until, name)
		}
	}
	if old == nil {
		return
	}
	for _, m := range old.Members() {
		if _, still := r.Member(m.Name); !still {
			if d.until == nil {
				d.until = map[string]departed{}
			}
			d.until[m.Name] = departed{m, deadline}
		}
	}
}

// get returns the member name that departed less than the pending TTL
// ago, if any.
func (d *departedSet) get(name string, now time.Time) (ring.Member, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.until[name]
	if !ok || now.After(t.until) {
		return ring.Member{}, false
	}
	return t.m, true
}

// checkPeer refuses a peer call of method from a caller that admits does
// not take: it logs the refusal, counts it in
// sluice_peer_refused_total{method} and returns an error wrapping
// ErrNotMember.
func (l *Limiter) checkPeer(method, from string) error {
	if l.admits(from) {
		return nil
	}
	return l.refuse(method, from)
}

// admits reports whether a peer call from node from is taken: from a
// member of this node's ring, or one that left it less than the pending
// TTL ago (a node that leaves still hands off and forwards for a while,
// and one that rejoins fetches its keys back before every ring has it
// again). Every method has this rule. This node's own name and the empty
// name are never admitted.
func (l *Limiter) admits(from string) bool {
	if from == "" || from == l.name {
		return false
	}
	v := l.view.Load()
	if v != nil && v.ring != nil {
		if _, ok := v.ring.Member(from); ok {
			return true
		}
	}
	_, ok := l.departed.get(from, time.Now())
	return ok
}

// admitsHandoff reports whether a Handoff with states from node from is
// taken: from a caller admits takes, and, where every peer call is
// authenticated (Config.PeersAuthenticated), from any caller while this
// node is not in a multi-node ring yet: it just started and has no state
// to lose, and nodes that saw it join first hand it their keys before its
// own ring has them. Without authentication a node alone takes states from
// members only (the sender retries until this node's ring has it), so no
// caller that merely reaches the peer port can plant a counter.
func (l *Limiter) admitsHandoff(from string) bool {
	if l.admits(from) {
		return true
	}
	if !l.peersAuthenticated || from == "" || from == l.name {
		return false
	}
	v := l.view.Load()
	return v == nil || v.ring == nil || v.ring.Len() <= 1
}

// refuse logs and counts a refused peer call and returns its error. The
// log is INFO: a node that rejoins calls its peers before every ring has it
// again, so refusals come with normal churn; sluice_peer_refused_total is
// what an operator watches for refusals that last.
func (l *Limiter) refuse(method, from string) error {
	l.metrics.peerRefused.WithLabelValues(method).Inc()
	l.log.Info("peer call refused: the caller is not a member of this node's ring", "method", method, "from", from)
	return fmt.Errorf("%w: %s from %q", ErrNotMember, method, from)
}
