package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// adopt sorts the states this node was just pushed by from that its own
// ring does not give it (the sender's ring is behind or ahead of this
// one), and returns those to pass on (see passOn), by owner, claimed.
//
// States the ring gives back to from are adopted: from has let go of
// them, so this node decides those keys itself until its ring changes or
// the keys are fetched (from forgot this node's acknowledgements of them
// when it pushed them, and HandOff acknowledges no partition of an
// adopted key, so from fetches them if it comes to own them). This node's
// copies of them (from's replicas: see replicate.go) are dropped: the
// state handed here is newer, and a copy merged into it later (when this
// node sees from leave, say) would undo what was credited since
// (TestGrantCreditOutlivesTheHeirsCopy).
func (l *Limiter) adopt(v *view, from string, entries []store.Entry) map[string][]uint64 {
	if v == nil || v.ring == nil || l.peers == nil || len(entries) == 0 {
		return nil
	}
	var groups map[string][]uint64
	var adopted []uint64
	for _, e := range entries {
		to, mine := v.owner(l.name, e.Key)
		if mine {
			continue
		}
		if to.Name == from {
			l.adopted.add(e.Key)
			adopted = append(adopted, e.Key)
			continue
		}
		if !l.passing.claim(e.Key) {
			continue
		}
		if groups == nil {
			groups = map[string][]uint64{}
		}
		groups[to.Name] = append(groups[to.Name], e.Key)
	}
	if len(adopted) > 0 && l.repl.copies != nil {
		l.repl.copies.Delete(adopted)
	}
	return groups
}

// passOn passes the states adopt set aside to their owner on this node's
// ring: this node may have acknowledged their partitions to that node
// already, which would then count the keys afresh; passing them on before
// the push is answered closes that gap. A key already being passed on by
// this node stays here (the rings on the way disagree in a circle, and it
// must stop somewhere).
//
// It returns an error wrapping ErrPeerUnavailable if some owner refused
// its states because its ring does not have this node: they stay here
// too, and the push that brought them must fail, so that its sender keeps
// its copy (it has acknowledged nothing of them to that owner, which
// fetches them from it).
func (l *Limiter) passOn(ctx context.Context, v *view, groups map[string][]uint64) error {
	var first error
	for name, keys := range groups {
		to, _ := v.ring.Member(name)
		if err := l.passOnTo(ctx, v.ring, to, keys); err != nil && first == nil {
			first = err
		}
		l.passing.release(keys)
	}
	return first
}

// passOnNoDeadline bounds a pass-on made without the caller's deadline.
const passOnNoDeadline = time.Second

// passOnTo moves the states of keys to node to. If to does not take them,
// they stay here; it returns an error only if to refuses this node as not
// a member (to would count them afresh on this node's acknowledgement).
// An owner that is leaving or out of reach will not. An owner behind this
// node's epoch catches up before it judges the caller (epochs.go).
func (l *Limiter) passOnTo(ctx context.Context, r *ring.Ring, to ring.Member, keys []uint64) error {
	now := l.clock().UnixNano()
	states, travel := l.extractTravelling(now, keys)
	defer l.transit.done(travel)
	if len(states) == 0 {
		return nil
	}
	if err := l.peers.Handoff(ctx, to, states, nil); err != nil {
		l.putBack(states)
		l.log.Log(ctx, churnLevel(err), "handoff: could not pass states on to their owner; they stay here", "to", to.Name, "states", len(states), "err", err)
		if !errors.Is(err, ErrNotMember) {
			// The owner is leaving or out of reach: it will not count
			// them on an acknowledgement from this node.
			return nil
		}
		// The cause is not wrapped: the pusher must not take this node for
		// a refusing one.
		return fmt.Errorf("%w: passing %d states on to %s: %v", ErrPeerUnavailable, len(states), to.Name, err)
	}
	parts := make([]int, len(keys))
	for i, k := range keys {
		parts[i] = r.Partition(k)
	}
	l.acks.forget(to.Name, parts)
	l.metrics.handedOff.Add(float64(len(states)))
	return nil
}

// putBack returns states taken out of the store to move them, after the
// move failed. They merge with whatever arrived for their keys meanwhile
// (a conservative merge, so a receiver that did take them before its
// answer was lost counts nothing twice).
func (l *Limiter) putBack(states []store.Entry) {
	now := l.clock().UnixNano()
	lost := 0
	for _, e := range states {
		if err := l.store.Import(e, now); err != nil {
			lost++ // full: new keys took the room they left
		}
	}
	if lost > 0 {
		l.log.Warn("handoff: states that could not be moved could not be kept either: store full", "lost", lost)
	}
}

// keySet is a set of keys safe for concurrent use; has is one atomic load
// while the set is empty.
type keySet struct {
	n  atomic.Int64 // len(m)
	mu sync.Mutex
	m  map[uint64]struct{}
}

// claim adds k and reports whether it was absent.
func (s *keySet) claim(k uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; ok {
		return false
	}
	if s.m == nil {
		s.m = map[uint64]struct{}{}
	}
	s.m[k] = struct{}{}
	s.n.Store(int64(len(s.m)))
	return true
}

// add adds k.
func (s *keySet) add(k uint64) { s.claim(k) }

// has reports whether k is in the set.
func (s *keySet) has(k uint64) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[k]
	return ok
}

// each calls f for every key in the set, holding the set's lock: f must
// not use the set.
func (s *keySet) each(f func(k uint64)) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.m {
		f(k)
	}
}

// release removes keys.
func (s *keySet) release(keys []uint64) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.m, k)
	}
	s.n.Store(int64(len(s.m)))
}

// clear empties the set.
func (s *keySet) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.m)
	s.n.Store(0)
}
