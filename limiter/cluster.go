package limiter

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/ring"
)

// view is the limiter's picture of the cluster: the ring in force and the
// partitions this node owns whose states may still be elsewhere. It is
// immutable once published, except for pending's own synchronised fields.
type view struct {
	ring    *ring.Ring
	pending *pending // nil when nothing is pending
	// heirs are ring's heirs of each partition, to which this node
	// replicates the states it owns; nil when replication is off.
	heirs *ring.Heirs
	// orphaned marks the partitions whose owner before this view was not
	// in ring (it died or left); nil when none. Copies of their keys held
	// here go to their new owner (see replicate.go); orphansPushed is set
	// once they have.
	orphaned      []bool
	orphansPushed atomic.Bool
	// waits is, per partition, the dead wait (AwaitDead, ownerlease.go)
	// until whose end this node decides none of its keys as owner: it
	// moved here from a member removed as dead. Nil when none.
	waits []*deadWait
}

// owner returns the owner of hash and whether it is this node. With no
// ring, or an empty one, this node owns everything.
func (v *view) owner(self string, hash uint64) (ring.Member, bool) {
	if v == nil || v.ring == nil {
		return ring.Member{Name: self}, true
	}
	m, ok := v.ring.Owner(hash)
	if !ok || m.Name == self {
		return m, true
	}
	return m, false
}

// SetMembers rebuilds the ring from a membership list (this node included,
// unless it is leaving) and swaps it in. Partitions this node gains become
// pending, and so do those still pending from earlier changes: until every
// node that may hold their states has handed them off, a check of a key
// that has not arrived yet fetches it first (see pending and doc.go).
// After SetMembers, the node should call HandOff to push the states it no
// longer owns. SetMembers must not be called concurrently with itself. A
// limiter built without Peers accepts only a list of itself
// (ErrInvalidConfig otherwise).
func (l *Limiter) SetMembers(members []ring.Member) error {
	if l.peers == nil {
		for _, m := range members {
			if m.Name != l.name {
				return fmt.Errorf("%w: Peers: nil, so the ring may list only this node, not %q", ErrInvalidConfig, m.Name)
			}
		}
	}
	r, err := ring.New(l.ringCfg, members)
	if err != nil {
		return fmt.Errorf("limiter: %w", err)
	}
	old := l.view.Load()
	prev, err := l.previousRing(old, r)
	if err != nil {
		return fmt.Errorf("limiter: %w", err)
	}
	mine := func(p int) bool {
		m, ok := r.PartitionOwner(p)
		return ok && m.Name == l.name
	}
	// Others may be handed states of the partitions this node loses.
	l.acks.keepOnly(mine)
	var oldRing *ring.Ring
	if old != nil {
		oldRing = old.ring
	}
	now := time.Now()
	l.departed.note(oldRing, r, now, now.Add(l.pendingTTL))
	nv := &view{ring: r, pending: l.pendingFor(old, prev, r, mine), orphaned: l.orphans(old, oldRing, r)}
	l.deadWaitsFor(nv, old, oldRing, r)
	if n := l.repl.heirsOn(r.Len()); n > 0 && r.Len() > 1 {
		if nv.heirs, err = r.Heirs(n); err != nil {
			return fmt.Errorf("limiter: %w", err)
		}
	}
	// Copies of the keys this node takes over from a departed owner are
	// in its store before any check is decided on the new ring.
	l.promote(r, nv.orphaned)
	l.deciding.lockAll()
	l.view.Store(nv)
	l.deciding.unlockAll()
	l.adopted.clear() // the new ring places them
	l.moved.prune(func(hash uint64) bool {
		_, mine := nv.owner(l.name, hash)
		return mine
	})
	if nv.pending != nil {
		l.log.Info("ring changed: receiving partitions", "members", r.Len(), "partitions", nv.pending.count)
	} else {
		l.log.Debug("ring changed", "members", r.Len())
	}
	return nil
}

// previousRing is the ring to compare the new one with, to find the
// partitions this node gains and who had them. A node that was not in a
// multi-node ring before (it just started or joined) compares with the
// new ring without itself: that is who owned its share until now, unless
// some of them are newcomers too, which is why pending asks every node.
func (l *Limiter) previousRing(old *view, r *ring.Ring) (*ring.Ring, error) {
	wasMember := false
	if old != nil && old.ring != nil && old.ring.Len() > 1 {
		_, wasMember = old.ring.Member(l.name)
	}
	if wasMember {
		return old.ring, nil
	}
	if _, isMember := r.Member(l.name); !isMember || r.Len() <= 1 {
		return nil, nil
	}
	others := make([]ring.Member, 0, r.Len()-1)
	for _, m := range r.Members() {
		if m.Name != l.name {
			others = append(others, m)
		}
	}
	return ring.New(l.ringCfg, others)
}

// pendingFor builds the pending partitions of ring r: those this node owns
// on r that it did not own on prev, and those it still owns that were
// pending on the old view (with the node that had them first, so a second
// change does not forget the first). Their holders are every
// other member of r and the holders of the old view that have left r.
// Partitions every holder has acknowledged already are left out; nil if
// none is pending.
func (l *Limiter) pendingFor(old *view, prev, r *ring.Ring, mine func(int) bool) *pending {
	if _, member := r.Member(l.name); !member || r.Len() <= 1 {
		return nil
	}
	n := r.PartitionCount()
	var was *pending
	if old != nil && old.pending != nil && len(old.pending.likely) == n {
		was = old.pending
	}
	if prev != nil && prev.PartitionCount() != n {
		prev = nil
	}
	if was == nil && prev == nil {
		return nil
	}
	p := newPending(n, time.Now().Add(l.pendingTTL), &l.acks)
	for _, m := range r.Members() {
		if m.Name != l.name {
			p.addHolder(m)
		}
	}
	var settled []uint64
	if was != nil {
		var hs []ring.Member
		hs, settled = was.carried(func(hash uint64) bool { return mine(r.Partition(hash)) })
		for _, h := range hs {
			p.addHolder(h)
		}
	}
	for i := 0; i < n; i++ {
		if !mine(i) {
			continue
		}
		if was.isPending(i) && was.open(i) {
			p.mark(i, was.likelyHolder(i))
		} else if prev != nil {
			if m, ok := prev.PartitionOwner(i); ok && m.Name != l.name {
				p.mark(i, m)
			}
		}
		if p.isPending(i) && !p.open(i) {
			p.unmark(i)
		}
	}
	if p.count == 0 {
		return nil
	}
	for _, k := range settled {
		if p.isPending(r.Partition(k)) {
			p.settled[k] = struct{}{}
		}
	}
	return p
}

// movedSet holds keys this node handed to their new owner on request
// (Fetch) while its own ring still says it owns them: their checks go to
// the new owner until the ring catches up.
type movedSet struct {
	n  atomic.Int64 // len(to), read without the lock on the hot path
	mu sync.Mutex
	to map[uint64]ring.Member
}

func (s *movedSet) add(hash uint64, to ring.Member) {
	s.mu.Lock()
	if s.to == nil {
		s.to = map[uint64]ring.Member{}
	}
	s.to[hash] = to
	s.n.Store(int64(len(s.to)))
	s.mu.Unlock()
}

// get returns where hash went, if it moved.
func (s *movedSet) get(hash uint64) (ring.Member, bool) {
	if s.n.Load() == 0 {
		return ring.Member{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.to[hash]
	return m, ok
}

// forget drops hashes: their states are here again.
func (s *movedSet) forget(hashes []uint64) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	for _, h := range hashes {
		delete(s.to, h)
	}
	s.n.Store(int64(len(s.to)))
	s.mu.Unlock()
}

// prune drops the keys for which keep returns false.
func (s *movedSet) prune(stillMine func(hash uint64) bool) {
	s.mu.Lock()
	for h := range s.to {
		if !stillMine(h) {
			delete(s.to, h)
		}
	}
	s.n.Store(int64(len(s.to)))
	s.mu.Unlock()
}
