package limiter

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/ring"
)

// view is the limiter's picture of the cluster: the ring in force and the
// partitions this node gained and is still receiving state for. It is
// immutable once published, except for pending's own synchronised fields.
type view struct {
	ring    *ring.Ring
	pending *pending // nil when nothing is pending
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
// pending: until their previous owner has handed them off, a check of a key
// that has not arrived yet fetches it from that owner first. After
// SetMembers, the node should call HandOff to push the states it no longer
// owns. SetMembers must not be called concurrently with itself. A limiter
// built without Peers accepts only a list of itself (ErrInvalidConfig
// otherwise).
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
	nv := &view{ring: r}
	prev, err := l.previousRing(old, r)
	if err != nil {
		return fmt.Errorf("limiter: %w", err)
	}
	nv.pending = l.gained(prev, r)
	l.view.Store(nv)
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
// partitions this node gains and where their state is. A node that was not
// in a multi-node ring before (it just started or joined) compares with the
// new ring without itself: that is who owned its share until now.
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

// gained lists the partitions this node owns in r but did not own in prev,
// with their previous owners, skipping those already handed off.
func (l *Limiter) gained(prev, r *ring.Ring) *pending {
	if prev == nil || prev.PartitionCount() != r.PartitionCount() {
		return nil
	}
	n := r.PartitionCount()
	var p *pending
	for i := 0; i < n; i++ {
		now, ok := r.PartitionOwner(i)
		if !ok || now.Name != l.name {
			continue
		}
		was, ok := prev.PartitionOwner(i)
		if !ok || was.Name == l.name || l.recent.done(i, was.Name) {
			continue
		}
		if p == nil {
			p = newPending(n, time.Now().Add(l.pendingTTL))
		}
		p.add(i, was)
	}
	return p
}

// pending tracks partitions whose state is still arriving from their
// previous owners.
type pending struct {
	from     []string               // per partition: previous owner, "" if not pending
	members  map[string]ring.Member // previous owners' addresses
	done     []bool                 // per partition: handoff finished (guarded by mu)
	deadline time.Time              // after it, nothing is pending any more
	count    int

	mu      sync.Mutex
	settled map[uint64]struct{} // keys fetched or pushed already
	gaveUp  map[string]bool     // previous owners that could not be reached
}

func newPending(partitions int, deadline time.Time) *pending {
	return &pending{
		from:     make([]string, partitions),
		members:  map[string]ring.Member{},
		done:     make([]bool, partitions),
		deadline: deadline,
		settled:  map[uint64]struct{}{},
		gaveUp:   map[string]bool{},
	}
}

func (p *pending) add(partition int, was ring.Member) {
	p.from[partition] = was.Name
	p.members[was.Name] = was
	p.count++
}

// source returns the previous owner to fetch hash from, if the key may
// still be on its way.
func (p *pending) source(partition int, hash uint64) (ring.Member, bool) {
	if p == nil || time.Now().After(p.deadline) {
		return ring.Member{}, false
	}
	from := p.from[partition]
	if from == "" {
		return ring.Member{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done[partition] || p.gaveUp[from] {
		return ring.Member{}, false
	}
	if _, ok := p.settled[hash]; ok {
		return ring.Member{}, false
	}
	return p.members[from], true
}

// settle records that hash's state has arrived (or never will).
func (p *pending) settle(hash uint64) {
	p.mu.Lock()
	p.settled[hash] = struct{}{}
	p.mu.Unlock()
}

// finish records that from has handed off partitions.
func (p *pending) finish(from string, partitions []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range partitions {
		if i >= 0 && i < len(p.from) && p.from[i] == from {
			p.done[i] = true
		}
	}
}

// reopen undoes finish for partitions whose states this node has just
// handed to from: from is no longer done with them.
func (p *pending) reopen(from string, partitions []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range partitions {
		if i >= 0 && i < len(p.from) && p.from[i] == from {
			p.done[i] = false
		}
	}
}

// giveUp records that from cannot be reached: its keys start afresh here.
func (p *pending) giveUp(from string) {
	p.mu.Lock()
	p.gaveUp[from] = true
	p.mu.Unlock()
}

// recentDone remembers handoffs that finished before this node's ring
// showed it gaining the partitions, so that they are not awaited again.
type recentDone struct {
	mu   sync.Mutex
	from map[int]string
	at   map[int]time.Time
	ttl  time.Duration
}

func (r *recentDone) record(from string, partitions []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.from == nil {
		r.from, r.at = map[int]string{}, map[int]time.Time{}
	}
	now := time.Now()
	for _, p := range partitions {
		r.from[p], r.at[p] = from, now
	}
}

// forget drops the records that from is done with partitions: this node
// has just handed states of those partitions to from, so from is no
// longer done with them if the partitions come back here.
func (r *recentDone) forget(from string, partitions []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range partitions {
		if r.from[p] == from {
			delete(r.from, p)
			delete(r.at, p)
		}
	}
}

func (r *recentDone) done(partition int, from string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.from[partition]
	return ok && f == from && time.Since(r.at[partition]) < r.ttl
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
