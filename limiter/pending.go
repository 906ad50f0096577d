package limiter

import (
	"sync"
	"time"

	"github.com/sluice-rl/sluice/ring"
)

// pending tracks the partitions this node owns on its ring whose states
// may still be on other nodes: the partitions it gained with the last ring
// changes. Its holders are every other node of the ring plus the previous
// owners that have left it, since after joins and leaves seen in any order
// any of them may hold a key (a newcomer may have been handed states
// meant for this node, a previous owner may itself have been waiting for
// them). A partition stops being pending when each holder has acknowledged
// it (acks), has been given up (unreachable), or the deadline passes. It
// is built by SetMembers and immutable after that, except for its
// synchronised fields.
type pending struct {
	deadline time.Time
	count    int   // partitions pending when built
	acks     *acks // the limiter's
	// likely[p] is notPending, noLikely, or the index in holders of the
	// node that owned p on the previous ring (asked first).
	likely  []int32
	holders []ring.Member

	mu      sync.Mutex
	settled map[uint64]struct{} // keys fetched or pushed already
	gaveUp  map[string]bool     // holders that could not be reached
}

const (
	notPending = -2
	noLikely   = -1
)

func newPending(partitions int, deadline time.Time, a *acks) *pending {
	p := &pending{
		deadline: deadline,
		acks:     a,
		likely:   make([]int32, partitions),
		settled:  map[uint64]struct{}{},
		gaveUp:   map[string]bool{},
	}
	for i := range p.likely {
		p.likely[i] = notPending
	}
	return p
}

// addHolder lists m as a node that may hold states, once, and returns its
// index.
func (p *pending) addHolder(m ring.Member) int32 {
	for i, h := range p.holders {
		if h.Name == m.Name {
			return int32(i)
		}
	}
	p.holders = append(p.holders, m)
	return int32(len(p.holders) - 1)
}

// mark makes partition pending, to be asked of likely first if it is not
// empty.
func (p *pending) mark(partition int, likely ring.Member) {
	if p.likely[partition] == notPending {
		p.count++
	}
	p.likely[partition] = noLikely
	if likely.Name != "" {
		p.likely[partition] = p.addHolder(likely)
	}
}

// unmark makes partition settled.
func (p *pending) unmark(partition int) {
	if p.likely[partition] != notPending {
		p.likely[partition] = notPending
		p.count--
	}
}

// isPending reports whether partition was pending when p was built and p
// has not expired.
func (p *pending) isPending(partition int) bool {
	return p != nil && partition < len(p.likely) && p.likely[partition] != notPending && !time.Now().After(p.deadline)
}

// likelyHolder returns the node partition is asked of first, if any and
// not given up.
func (p *pending) likelyHolder(partition int) ring.Member {
	i := p.likely[partition]
	if i < 0 {
		return ring.Member{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gaveUp[p.holders[i].Name] {
		return ring.Member{}
	}
	return p.holders[i]
}

// open reports whether some holder may still have states of partition.
func (p *pending) open(partition int) bool {
	m, _ := p.from(partition, 0, false)
	return len(m) > 0
}

// from returns the holders to fetch hash from, the likely one first (and
// then first is true); none if the partition is not pending, the key has
// settled or every holder has acknowledged the partition.
func (p *pending) from(partition int, hash uint64, byKey bool) (holders []ring.Member, first bool) {
	if !p.isPending(partition) {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.settled[hash]; ok && byKey {
		return nil, false
	}
	now := time.Now()
	p.acks.mu.Lock()
	defer p.acks.mu.Unlock()
	waiting := func(h ring.Member) bool {
		return !p.gaveUp[h.Name] && !p.acks.doneLocked(h.Name, partition, now)
	}
	li := p.likely[partition]
	if li >= 0 && waiting(p.holders[li]) {
		holders, first = append(holders, p.holders[li]), true
	}
	for i, h := range p.holders {
		if int32(i) != li && waiting(h) {
			holders = append(holders, h)
		}
	}
	return holders, first
}

// settle records that hash's state has arrived (or never will).
func (p *pending) settle(hash uint64) {
	p.mu.Lock()
	p.settled[hash] = struct{}{}
	p.mu.Unlock()
}

// giveUp records that holder cannot be reached: what it holds is not
// awaited any more.
func (p *pending) giveUp(holder string) {
	p.mu.Lock()
	p.gaveUp[holder] = true
	p.mu.Unlock()
}

// carried returns the holders that are still worth asking on the next
// ring (those not given up) and the keys settled in partitions for which
// keep returns true.
func (p *pending) carried(keep func(hash uint64) bool) ([]ring.Member, []uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var hs []ring.Member
	for _, h := range p.holders {
		if !p.gaveUp[h.Name] {
			hs = append(hs, h)
		}
	}
	var keys []uint64
	for k := range p.settled {
		if keep(k) {
			keys = append(keys, k)
		}
	}
	return hs, keys
}
