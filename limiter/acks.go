package limiter

import (
	"sync"
	"time"
)

// acks remembers which nodes have told this one that they hold nothing of
// a partition (the done partitions of a Handoff call): a node sends them
// for every partition it sees this node own, once it has pushed its states
// of them. A gained partition stays pending until every node that may hold
// some of its state has acknowledged it (see pending).
//
// An acknowledgement may arrive before this node's own ring shows it
// owning the partition (the sender saw the change first); it is kept for
// that. It stops counting when:
//   - this node hands states of the partition to the sender (forget): the
//     sender holds some again;
//   - this node takes a ring on which it does not own the partition
//     (keepOnly): the next owner may give the sender states of it;
//   - ttl has passed since it arrived (the pending TTL).
type acks struct {
	mu  sync.Mutex
	ttl time.Duration
	at  map[ackKey]time.Time
}

type ackKey struct {
	from      string
	partition int
}

// record notes that from holds nothing of partitions.
func (a *acks) record(from string, partitions []int) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = map[ackKey]time.Time{}
	}
	for _, p := range partitions {
		a.at[ackKey{from, p}] = now
	}
}

// forget drops from's acknowledgements of partitions: this node has just
// handed it states of them.
func (a *acks) forget(from string, partitions []int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range partitions {
		delete(a.at, ackKey{from, p})
	}
}

// keepOnly drops the acknowledgements of partitions for which mine
// returns false, and those older than ttl.
func (a *acks) keepOnly(mine func(partition int) bool) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, t := range a.at {
		if !mine(k.partition) || now.Sub(t) >= a.ttl {
			delete(a.at, k)
		}
	}
}

// doneLocked reports whether from has acknowledged partition, within ttl
// of now. The caller holds a.mu.
func (a *acks) doneLocked(from string, partition int, now time.Time) bool {
	t, ok := a.at[ackKey{from, partition}]
	return ok && now.Sub(t) < a.ttl
}
