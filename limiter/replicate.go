package limiter

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Replication. An owner's keys live on one node; so that a kill -9 of
// that node does not lose their counts, each owner copies the states it
// changes to the keys' heirs (ring.Heirs: the nodes the ring gives each
// key to if its owner goes), batched, each time the node calls Replicate
// (every ReplicationInterval, 50 ms by default, and sooner when a key
// spends its last token: see Urgent):
//
//   - The store logs the keys written since the last round
//     (store.Config.TrackChanges, under the shard lock a write holds
//     anyway) and Replicate sends their states to their heirs in one
//     Replicate call per heir. After a ring change the heirs may differ:
//     the next round also sends every state whose heirs changed.
//   - An heir keeps the copies in a store of its own (replicas), replacing
//     its copy of a key with each one it is sent: the owner's state is the
//     truth, including credits that lowered it.
//   - When a ring change takes a partition from an owner that has left the
//     ring (died, or left), its heir, now its owner, merges its copies of
//     the partition's keys into its store before it decides on the new
//     ring (promote, in SetMembers). Other nodes holding copies of such a
//     partition push them to the new owner in their HandOff, before they
//     acknowledge the partition, and hand them over when the new owner
//     fetches a key they hold no state of (FetchMoved): a new owner that was
//     not the heir (two changes at once, or with Replicas above 1) still
//     finds the copy. Merges are conservative (store.Import), so a copy
//     older than a state handed over by a node that left gracefully changes
//     nothing.
//
// What a kill -9 can lose is then what the owner admitted since the last
// round that reached the heir: at most one ReplicationInterval of its
// admissions (docs/failure.md).

// ResyncInterval is how often, at most, an heir that a round of
// replication failed to reach is sent every state it is heir of again.
const ResyncInterval = time.Second

// notMemberResync divides ResyncInterval for an heir that refused a round
// as from a non-member (a joiner that has not heard of this node yet).
const notMemberResync = 10

// ReplicaStats counts replication on this node.
type ReplicaStats struct {
	// Sent is the number of states sent to heirs; Failed, those whose call
	// failed (they are sent again when next changed, or lost if the owner
	// dies first).
	Sent, Failed uint64
	// Received is the number of copies taken from owners; Promoted, the
	// copies merged into this node's store as it took their keys over;
	// Pushed, the copies handed to a new owner that was not this node.
	Received, Promoted, Pushed uint64
	// Held is the number of copies held now.
	Held int64
}

// replication is a limiter's replication state.
type replication struct {
	n        int          // heirs per key; 0: off; autoHeirs: by the ring
	copies   *store.Store // the copies this node holds as an heir
	acting   *store.Store // what it admitted acting for owners (acting.go)
	lastView *view        // the view of the last round (Replicate only)
	// behind maps the heirs a round failed to reach to the time of their
	// last full resend (Replicate only): what they missed is sent again
	// whole, at most once a ResyncInterval.
	behind map[string]int64

	sent, failed, received, promoted, pushed atomic.Uint64

	// tap receives every state ExportChanged hands over (Config.OnChanged),
	// in tapBuf, reused from round to round (Replicate only).
	tap    func([]store.Entry)
	tapBuf []store.Entry

	// urgent receives (buffered, never blocking the sender) when a key
	// this node decides has just spent its last token: see Urgent.
	urgent chan struct{}
}

// Urgent returns a channel that receives when a key this node decided
// has just spent its last token (nil with replication off). The node then
// runs a round of Replicate at once rather than at the next tick: a key
// spent to its limit is the one whose copy matters, and under even load
// many keys reach their limit together, so an owner killed right after
// would otherwise lose up to a whole interval of their admissions (A in
// docs/failure.md).
func (l *Limiter) Urgent() <-chan struct{} { return l.repl.urgent }

// spentOut signals Urgent, if anyone listens and no signal is pending.
func (l *Limiter) spentOut() {
	if l.repl.urgent == nil {
		return
	}
	select {
	case l.repl.urgent <- struct{}{}:
	default:
	}
}

// ReplicaStats returns this node's replication counters.
func (l *Limiter) ReplicaStats() ReplicaStats {
	r := &l.repl
	s := ReplicaStats{Sent: r.sent.Load(), Failed: r.failed.Load(), Received: r.received.Load(),
		Promoted: r.promoted.Load(), Pushed: r.pushed.Load()}
	if r.copies != nil {
		s.Held = r.copies.Stats().Keys
	}
	return s
}

// Replicate sends the states changed since the last call, and after a ring
// change those whose heirs changed, to the heirs of their keys, and
// returns how many it sent. It also hands the changed states to
// Config.OnChanged. The node calls it every ReplicationInterval;
// calls must not overlap.
func (l *Limiter) Replicate(ctx context.Context) int {
	r := &l.repl
	v := l.view.Load()
	now := l.clock().UnixNano()
	var tapped []store.Entry
	if r.tap != nil {
		tapped = r.tapBuf[:0]
		defer func() {
			if len(tapped) > 0 {
				r.tap(tapped)
			}
			clear(tapped) // no log or lease slice kept reachable
			r.tapBuf = tapped[:0]
		}()
	}
	drain := func(fn func(store.Entry)) {
		l.store.ExportChanged(now, func(e store.Entry) bool {
			if r.tap != nil {
				tapped = append(tapped, e)
			}
			if fn != nil {
				fn(e)
			}
			return true
		})
	}
	if r.n == 0 || l.peers == nil {
		drain(nil) // the tap's alone
		return 0
	}
	if v == nil || v.heirs == nil || v.heirs.Len() == 0 {
		// Nobody to copy to: forget the log, the next ring sends all.
		drain(nil)
		r.lastView = v
		return 0
	}
	batches := map[string][]store.Entry{}
	add := func(e store.Entry) {
		if _, mine := l.route(v, e.Key); !mine {
			return // being handed off: its new owner replicates it
		}
		for k := 0; k < v.heirs.Len(); k++ {
			h, ok := v.heirs.Heir(e.Key, k)
			if !ok {
				break
			}
			batches[h.Name] = append(batches[h.Name], e)
		}
	}
	// Heirs a failed round left behind get every state they are heir of,
	// at most once a ResyncInterval each, once they are members.
	var resend map[string]bool
	for name, at := range r.behind {
		if _, member := v.ring.Member(name); !member {
			delete(r.behind, name)
		} else if now-at >= int64(ResyncInterval) {
			if resend == nil {
				resend = map[string]bool{}
			}
			resend[name] = true
			r.behind[name] = now
		}
	}
	var seen map[uint64]bool // with a full round: the keys sent already
	if r.lastView != v || resend != nil {
		seen = map[uint64]bool{}
	}
	drain(func(e store.Entry) {
		add(e)
		if seen != nil {
			seen[e.Key] = true
		}
	})
	if seen != nil {
		// The heirs changed (or some were behind): also send every state
		// whose heirs did (or that they are heir of).
		var old *ring.Heirs
		if r.lastView != nil && r.lastView != v {
			old = r.lastView.heirs
		} else {
			old = v.heirs
		}
		wanted := func(k uint64) bool {
			if seen[k] {
				return false
			}
			if !sameHeirs(old, v.heirs, k) {
				return true
			}
			for i := 0; i < v.heirs.Len(); i++ {
				if h, ok := v.heirs.Heir(k, i); ok && resend[h.Name] {
					return true
				}
			}
			return false
		}
		l.store.Export(now, wanted, func(e store.Entry) bool {
			add(e)
			return ctx.Err() == nil
		})
		r.lastView = v
	}
	sent := 0
	for name, entries := range batches {
		to, ok := v.ring.Member(name)
		if !ok || name == l.name {
			continue
		}
		if err := l.peers.Replicate(ctx, to, entries); err != nil {
			r.failed.Add(uint64(len(entries)))
			if r.behind == nil {
				r.behind = map[string]int64{}
			}
			if errors.Is(err, ErrNotMember) {
				// An heir that has just joined and has not heard of
				// this node yet will within moments: it is sent
				// everything again after a tenth of the interval.
				r.behind[name] = now - int64(ResyncInterval) + int64(ResyncInterval/notMemberResync)
			} else if _, ok := r.behind[name]; !ok {
				r.behind[name] = now
			}
			l.log.Debug("replication to heir failed", "to", name, "states", len(entries), "err", err)
			continue
		}
		if resend[name] {
			delete(r.behind, name)
		}
		sent += len(entries)
	}
	r.sent.Add(uint64(sent))
	return sent
}

// sameHeirs reports whether key has the same heirs in a and b.
func sameHeirs(a, b *ring.Heirs, key uint64) bool {
	if a == nil || b == nil || a.Len() != b.Len() {
		return a == b
	}
	for k := 0; k < a.Len(); k++ {
		x, xok := a.Heir(key, k)
		y, yok := b.Heir(key, k)
		if xok != yok || x.Name != y.Name {
			return false
		}
	}
	return true
}

// AcceptReplicas takes copies of states from node from, their owner: each
// replaces this node's copy of its key. Only members of this node's ring
// (or nodes that left it less than the pending TTL ago) may send them
// (ErrNotMember). It returns how many copies the replica store refused
// (full). A node with replication off keeps nothing and says so by
// returning them all as refused.
func (l *Limiter) AcceptReplicas(ctx context.Context, from string, entries []store.Entry) (int, error) {
	l.settleEpoch(ctx)
	if err := l.checkPeer("Replicate", from); err != nil {
		return 0, err
	}
	r := &l.repl
	if r.copies == nil {
		return len(entries), nil
	}
	now := l.clock().UnixNano()
	refused := 0
	for _, e := range entries {
		if l.adopted.has(e.Key) {
			// Handed here by its owner, which has let go of it: a copy
			// sent before that is older than the state here (see adopt).
			continue
		}
		if err := r.copies.Replace(e, now); err != nil {
			if errors.Is(err, store.ErrInvalidEntry) {
				l.metrics.invalidStates.Inc()
			}
			refused++
		}
	}
	r.received.Add(uint64(len(entries) - refused))
	return refused, nil
}

// orphans returns the partitions of r whose owner on old is not a member
// of r (it died or left), with those of prior, the previous view, whose
// copies have not been pushed yet; nil if there are none or replication is
// off.
func (l *Limiter) orphans(prior *view, old, r *ring.Ring) []bool {
	if l.repl.n == 0 {
		return nil
	}
	var out []bool
	mark := func(p int) {
		if out == nil {
			out = make([]bool, r.PartitionCount())
		}
		out[p] = true
	}
	if prior != nil && prior.orphaned != nil && !prior.orphansPushed.Load() && len(prior.orphaned) == r.PartitionCount() {
		for p, o := range prior.orphaned {
			if o {
				mark(p)
			}
		}
	}
	if old == nil || old.Len() <= 1 || old.PartitionCount() != r.PartitionCount() {
		return out
	}
	for p := 0; p < r.PartitionCount(); p++ {
		if m, ok := old.PartitionOwner(p); ok {
			if _, member := r.Member(m.Name); !member {
				mark(p)
			}
		}
	}
	return out
}

// promote merges into the store the copies of the orphaned partitions that
// ring r gives this node, and drops them from the copies.
func (l *Limiter) promote(r *ring.Ring, orphaned []bool) {
	if orphaned == nil || l.repl.copies == nil {
		return
	}
	now := l.clock().UnixNano()
	mineOrphan := func(k uint64) bool {
		p := r.Partition(k)
		if !orphaned[p] {
			return false
		}
		m, ok := r.PartitionOwner(p)
		return ok && m.Name == l.name
	}
	var keys, acted []uint64
	take := func(into *[]uint64) func(store.Entry) bool {
		return func(e store.Entry) bool {
			if err := l.store.Import(e, now); err != nil {
				l.log.Warn("replica not taken over", "err", err)
				return true
			}
			*into = append(*into, e.Key)
			return true
		}
	}
	l.repl.copies.Export(now, mineOrphan, take(&keys))
	// What this node admitted acting for the departed owner is in its
	// acting states (merged with the copies): they join the store, and
	// the reports of those admissions, which would now go to this node,
	// are dropped so that nothing counts twice.
	l.repl.acting.Export(now, mineOrphan, take(&acted))
	if len(acted) > 0 {
		l.repl.acting.Delete(acted)
		l.reports.drop(acted)
	}
	if len(keys) > 0 {
		l.repl.copies.Delete(keys)
		l.repl.promoted.Add(uint64(len(keys)))
		l.log.Info("took over replicated states of a departed owner", "states", len(keys), "acted_for", len(acted))
	}
}

// pushOrphans hands the copies of v's orphaned partitions that ring r
// gives other nodes to those nodes (HandOff calls it before acknowledging
// partitions), and drops those handed over. It marks v's orphans pushed
// when every push succeeded.
func (l *Limiter) pushOrphans(ctx context.Context, v *view, r *ring.Ring) {
	if v.orphaned == nil || l.repl.copies == nil || v.orphansPushed.Load() {
		return
	}
	now := l.clock().UnixNano()
	batches := map[string][]store.Entry{}
	l.repl.copies.Export(now, func(k uint64) bool {
		p := r.Partition(k)
		if p >= len(v.orphaned) || !v.orphaned[p] {
			return false
		}
		m, ok := r.PartitionOwner(p)
		return ok && m.Name != l.name
	}, func(e store.Entry) bool {
		m, _ := r.Owner(e.Key)
		batches[m.Name] = append(batches[m.Name], e)
		return true
	})
	ok := true
	for name, entries := range batches {
		to, _ := r.Member(name)
		if err := l.peers.Handoff(ctx, to, entries, nil); err != nil {
			ok = false
			l.log.Log(ctx, churnLevel(err), "replicas of a departed owner not handed to the new owner", "to", name, "err", err)
			continue
		}
		keys := make([]uint64, len(entries))
		for i, e := range entries {
			keys[i] = e.Key
		}
		l.repl.copies.Delete(keys)
		l.repl.pushed.Add(uint64(len(keys)))
	}
	if ok {
		v.orphansPushed.Store(true)
	}
}

// keepAsCopies keeps, as this node's copies, the states it has just handed
// to their new owner on ring r whose first heir it is there (it owned them
// while that owner was away): should it act for that owner before the
// owner's first round of replication reaches it, it acts on the count it
// handed over, not from nothing.
func (l *Limiter) keepAsCopies(v *view, r *ring.Ring, entries []store.Entry) {
	if l.repl.copies == nil || v.heirs == nil || v.ring != r {
		return
	}
	now := l.clock().UnixNano()
	for _, e := range entries {
		if h, ok := v.heirs.Heir(e.Key, 0); ok && h.Name == l.name {
			_ = l.repl.copies.Replace(e, now) // a full copy store keeps its older copies
		}
	}
}

// replicaOf returns the copies of the keys of hashes that have no state in
// entries (FetchMoved: the caller takes the keys over). The copies stay:
// the caller may be the key's owner asking for a partition still pending
// on its ring, and if it becomes unreachable next, this node acts for it on
// its copy (acting.go); taking the copy away would leave it acting from
// nothing. A copy that has gone stale meanwhile merges as the older state
// wherever it goes, and the owner's next round replaces it.
func (l *Limiter) replicaOf(hashes []uint64, entries []store.Entry) []store.Entry {
	if l.repl.copies == nil {
		return entries
	}
	have := make(map[uint64]bool, len(entries))
	for _, e := range entries {
		have[e.Key] = true
	}
	var missing []uint64
	for _, h := range hashes {
		if !have[h] {
			missing = append(missing, h)
		}
	}
	if len(missing) == 0 {
		return entries
	}
	return append(entries, l.repl.copies.Copy(l.clock().UnixNano(), missing)...)
}
