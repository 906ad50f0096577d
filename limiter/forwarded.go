package limiter

import (
	"context"
	"time"

	"github.com/sluice-rl/sluice/store"
)

// The methods in this file serve other nodes (transport's peer API calls
// them). from is the calling node's name; hops counts earlier forwards.
// An item whose owner, by this node's ring, is another node is forwarded
// once more when hops is 0 (the sender's ring was stale); after that it is
// decided here, so no item travels in circles while rings disagree.

// CheckForwarded applies items forwarded by another node and fills out[i]
// for items[i].
func (l *Limiter) CheckForwarded(ctx context.Context, from string, hops int, items []Forwarded, out []Answer) {
	jobs := make([]job, len(items))
	results := make([]Result, len(items))
	for i, it := range items {
		jobs[i] = job{hash: it.Hash, limit: it.Limit, cost: it.Cost, upTo: it.UpTo, res: &results[i]}
	}
	l.decide(ctx, l.view.Load(), hops+1, hops >= 1, jobs, l.clock().UnixNano())
	for i := range results {
		out[i] = Answer{Result: results[i].Result, Err: results[i].Err, Granted: jobs[i].granted}
	}
}

// AcquireForwarded takes a lease for another node.
func (l *Limiter) AcquireForwarded(ctx context.Context, from string, hops int, item Forwarded, ttl time.Duration) (Answer, uint64) {
	a, id, _ := l.acquire(ctx, l.view.Load(), hops+1, hops >= 1, item, ttl)
	return a, id
}

// ReleaseForwarded returns a lease for another node.
func (l *Limiter) ReleaseForwarded(ctx context.Context, from string, hops int, item Forwarded, leaseID uint64) (Answer, bool) {
	a, ok, _ := l.release(ctx, l.view.Load(), hops+1, hops >= 1, item, leaseID)
	return a, ok
}

// FetchMoved removes and returns the states of hashes for node from, their
// new owner. Keys this node still owns by its own ring (it has not seen
// the change yet) are remembered as moved, so their checks go to from.
func (l *Limiter) FetchMoved(ctx context.Context, from string, hashes []uint64) []store.Entry {
	v := l.view.Load()
	if v != nil && v.ring != nil {
		if to, ok := v.ring.Member(from); ok {
			for _, h := range hashes {
				if _, mine := v.owner(l.name, h); mine {
					l.moved.add(h, to)
				}
			}
		}
	}
	return l.store.Extract(l.clock().UnixNano(), hashes)
}

// AcceptHandoff merges states pushed by node from, their previous owner,
// and records the partitions it has finished handing off. It returns how
// many states the store refused (full).
func (l *Limiter) AcceptHandoff(ctx context.Context, from string, entries []store.Entry, donePartitions []int) int {
	now := l.clock().UnixNano()
	v := l.view.Load()
	refused := 0
	for _, e := range entries {
		if err := l.store.Import(e, now); err != nil {
			refused++
		}
		if v != nil && v.pending != nil {
			v.pending.settle(e.Key)
		}
	}
	if len(donePartitions) > 0 {
		l.recent.record(from, donePartitions)
		if v != nil && v.pending != nil {
			v.pending.finish(from, donePartitions)
		}
	}
	if refused > 0 {
		l.log.Warn("handoff: states refused, store full", "from", from, "refused", refused)
	}
	return refused
}

// handoffBatch is how many states go in one Handoff call.
const handoffBatch = 1000

// HandOff pushes every state this node holds but no longer owns (by the
// ring in force) to its owner, deleting each batch once the owner has
// accepted it, then tells each owner which partitions are done. A batch an
// owner did not accept stays here (the owner fetches such keys on demand),
// and that owner is not told it is done. It returns how many states moved.
// The node calls it after each SetMembers and on graceful shutdown; calls
// are serialized.
func (l *Limiter) HandOff(ctx context.Context) (int, error) {
	l.handoffMu.Lock()
	defer l.handoffMu.Unlock()
	v := l.view.Load()
	if v == nil || v.ring == nil || l.peers == nil {
		return 0, nil
	}
	type batch struct {
		entries []store.Entry
		keys    []uint64
	}
	batches := map[string]*batch{}
	failed := map[string]error{}
	moved := 0
	flush := func(name string, b *batch) {
		if len(b.entries) == 0 || failed[name] != nil {
			return
		}
		to, _ := v.ring.Member(name)
		if err := l.peers.Handoff(ctx, to, b.entries, nil); err != nil {
			failed[name] = err
			l.log.Warn("handoff to new owner failed; its keys stay here until fetched", "to", name, "err", err)
			return
		}
		l.store.Delete(b.keys)
		moved += len(b.keys)
		l.metrics.handedOff.Add(float64(len(b.keys)))
		b.entries, b.keys = b.entries[:0], b.keys[:0]
	}
	notMine := func(k uint64) bool {
		_, mine := v.owner(l.name, k)
		return !mine
	}
	l.store.Export(l.clock().UnixNano(), notMine, func(e store.Entry) bool {
		owner, _ := v.owner(l.name, e.Key)
		b := batches[owner.Name]
		if b == nil {
			b = &batch{}
			batches[owner.Name] = b
		}
		b.entries = append(b.entries, e)
		b.keys = append(b.keys, e.Key)
		if len(b.entries) >= handoffBatch {
			flush(owner.Name, b)
		}
		return ctx.Err() == nil
	})
	for name, b := range batches {
		flush(name, b)
	}
	if err := ctx.Err(); err != nil {
		return moved, err
	}
	// Tell every owner which partitions this node has finished with.
	done := map[string][]int{}
	for p := 0; p < v.ring.PartitionCount(); p++ {
		if m, ok := v.ring.PartitionOwner(p); ok && m.Name != l.name && failed[m.Name] == nil {
			done[m.Name] = append(done[m.Name], p)
		}
	}
	for name, parts := range done {
		to, _ := v.ring.Member(name)
		if err := l.peers.Handoff(ctx, to, nil, parts); err != nil {
			failed[name] = err
			l.log.Warn("handoff: could not confirm partitions", "to", name, "err", err)
		}
	}
	if moved > 0 {
		l.log.Info("handed off keys to their new owners", "states", moved, "owners", len(batches))
	}
	if len(failed) > 0 {
		return moved, ErrPeerUnavailable
	}
	return moved, nil
}
