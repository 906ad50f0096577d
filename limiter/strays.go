package limiter

import (
	"sync"
	"time"

	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// strays remembers the partitions of states that a node not in this
// node's ring tried to hand it (refused with ErrNotMember): they stay on
// that node. Its earlier acknowledgements of those partitions are
// forgotten (it holds some again), and once this node's ring takes that
// node in, the partitions this node owns become pending again, asked of
// that node first (see pendingFor): a partition this node kept across the
// ring change would not be pending otherwise, and its keys would count
// afresh here while their states wait on the newcomer.
//
// A note lasts the pending TTL; at most maxStrays are kept.
type strays struct {
	mu  sync.Mutex
	ttl time.Duration
	at  map[ackKey]time.Time
}

// maxStrays bounds the notes: one per sender and partition.
const maxStrays = 1 << 17

// record notes that from holds states of partitions.
func (s *strays) record(from string, partitions []int) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[ackKey]time.Time{}
	}
	for _, p := range partitions {
		k := ackKey{from, p}
		if _, ok := s.at[k]; ok || len(s.at) < maxStrays {
			s.at[k] = now
		}
	}
}

// take removes and returns the notes of senders that are members of r,
// as the member holding each partition, and drops expired notes.
func (s *strays) take(r *ring.Ring) map[int]ring.Member {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out map[int]ring.Member
	for k, t := range s.at {
		m, member := r.Member(k.from)
		if !member && now.Sub(t) < s.ttl {
			continue
		}
		delete(s.at, k)
		if member && now.Sub(t) < s.ttl {
			if out == nil {
				out = map[int]ring.Member{}
			}
			out[k.partition] = m
		}
	}
	return out
}

// noteStrays records the partitions of entries, which this node refused
// from a node not in its ring (see strays).
func (l *Limiter) noteStrays(from string, entries []store.Entry) {
	v := l.view.Load()
	if v == nil || v.ring == nil || len(entries) == 0 || from == "" || from == l.name {
		return
	}
	parts := make([]int, 0, len(entries))
	seen := map[int]bool{}
	for _, e := range entries {
		if p := v.ring.Partition(e.Key); !seen[p] {
			seen[p] = true
			parts = append(parts, p)
		}
	}
	l.acks.forget(from, parts)
	l.strays.record(from, parts)
}
