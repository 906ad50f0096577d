package limiter

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluice-rl/sluice/ring"

	"github.com/sluice-rl/sluice/store"
)

// The methods in this file serve other nodes (transport's peer API calls
// them). from is the calling node's name; hops counts earlier forwards.
// An item whose owner, by this node's ring, is another node is forwarded
// once more when hops is 0 (the sender's ring was stale); after that it is
// decided here, so no item travels in circles while rings disagree.

// CheckForwarded applies items forwarded by another node and fills out[i]
// for items[i]. A caller that is not a member of this node's ring (nor one
// that left it lately) is refused with ErrNotMember and nothing is applied.
func (l *Limiter) CheckForwarded(ctx context.Context, from string, hops int, items []Forwarded, out []Answer) error {
	if err := l.epochGate(ctx, hops, items); err != nil {
		return err
	}
	if err := l.checkPeer("Check", from); err != nil {
		return err
	}
	jobs := make([]job, len(items))
	results := make([]Result, len(items))
	now := l.clock().UnixNano()
	returns, acting := false, false
	for i, it := range items {
		jobs[i] = job{hash: it.Hash, limit: it.Limit, cost: it.Cost, upTo: it.UpTo, credit: it.Credit, report: it.Report, acting: it.Acting, inline: it.Inline, client: it.Client, res: &results[i]}
		returns = returns || it.Return != 0
		acting = acting || it.Acting
	}
	switch {
	case acting:
		l.decideActing(ctx, l.view.Load(), hops, jobs, now)
	case returns:
		l.checkWithReturns(ctx, hops, items, jobs, now)
	default:
		l.decide(ctx, l.view.Load(), hops+1, hops >= 1, jobs, now)
	}
	for i := range results {
		j := &jobs[i]
		out[i] = Answer{Result: results[i].Result, Err: results[i].Err, Granted: j.granted, GrantID: j.grantID, Issuer: j.issuer}
	}
	return nil
}

// AcquireForwarded takes a lease for another node (ErrNotMember if the
// caller is not one this node knows, as for CheckForwarded).
func (l *Limiter) AcquireForwarded(ctx context.Context, from string, hops int, item Forwarded, ttl time.Duration) (Answer, store.LeaseID, error) {
	if err := l.epochGate(ctx, hops, []Forwarded{item}); err != nil {
		return Answer{}, store.LeaseID{}, err
	}
	if err := l.checkPeer("Acquire", from); err != nil {
		return Answer{}, store.LeaseID{}, err
	}
	a, id, _ := l.acquire(ctx, l.view.Load(), hops+1, hops >= 1, item, ttl)
	return a, id, nil
}

// ReleaseForwarded returns a lease for another node (ErrNotMember if the
// caller is not one this node knows, as for CheckForwarded).
func (l *Limiter) ReleaseForwarded(ctx context.Context, from string, hops int, item Forwarded, leaseID store.LeaseID) (Answer, bool, error) {
	if err := l.epochGate(ctx, hops, []Forwarded{item}); err != nil {
		return Answer{}, false, err
	}
	if err := l.checkPeer("Release", from); err != nil {
		return Answer{}, false, err
	}
	a, ok, _ := l.release(ctx, l.view.Load(), hops+1, hops >= 1, item, leaseID)
	return a, ok, nil
}

// FetchMoved removes and returns the states of hashes for node from, their
// new owner (copies of those on their way to an owner: see transit). Keys
// this node still owns by its own ring (it has not seen the change yet)
// are remembered as moved, so their checks go to from and are never
// counted afresh here; keys it had adopted are not decided here any more;
// the others go to their owner on this ring anyway.
//
// A fetch from a node behind this node's epoch for a key this node's ring
// does not give to it is redirected (an EpochError wrapping
// ErrEpochAhead), nothing removed: the key has moved on since the asker's
// epoch, and the asker catches up before it decides the key (fetch.go).
//
// Only a member of this node's ring (or one that left it less than the
// pending TTL ago, as for every peer call) may take states: another caller
// that asks for a key this node holds (its state, or as an heir a copy:
// see holds) is refused with ErrNotMember and nothing is removed (it has
// not seen the caller join yet, or the caller is no node of the cluster);
// one that asks only for keys this node holds nothing of gets an empty
// answer, as a member would, so that a newcomer that these nodes have not
// seen yet need not wait for them.
func (l *Limiter) FetchMoved(ctx context.Context, from string, hashes []uint64) ([]store.Entry, error) {
	senderEp, ep, _ := l.catchUp(ctx) // served either way, as settleEpoch
	if !l.admits(from) {
		now := l.clock().UnixNano()
		for _, h := range hashes {
			if l.holds(now, h) {
				return nil, l.refuse("Fetch", from)
			}
		}
		return nil, nil
	}
	v := l.view.Load()
	if senderEp != 0 && senderEp < ep {
		for _, h := range hashes {
			if o, _ := v.owner(l.name, h); o.Name != from {
				l.metrics.epochRedirected.Inc()
				return nil, &EpochError{Epoch: ep, Ahead: true}
			}
		}
	}
	l.adopted.release(hashes)
	to, ok := v.ring.Member(from)
	if !ok {
		to, _ = l.departed.get(from, time.Now()) // checkPeer found it there
	}
	var mine []uint64
	for _, h := range hashes {
		if _, ok := v.owner(l.name, h); ok {
			mine = append(mine, h)
		}
	}
	// A decision on one of mine that routed before it was marked moved
	// takes before the state leaves, or sees the mark and goes to from
	// (applyLocal): the mark and the extraction are under the keys'
	// stripes.
	unlock := l.deciding.lockKeys(mine)
	defer unlock()
	for _, h := range mine {
		l.moved.add(h, to)
	}
	// A state on its way to its owner is given as a copy: the push
	// merges into it as the same state (see transit).
	entries := l.store.Extract(l.clock().UnixNano(), hashes)
	entries = l.transit.appendMissing(hashes, entries)
	if len(entries) < len(hashes) {
		// A push that failed meanwhile has put its states back in the
		// store before it stopped recording them as travelling
		// (extractTravelling moves them the other way in the other order).
		entries = append(entries, l.store.Extract(l.clock().UnixNano(), missingFrom(hashes, entries))...)
	}
	l.keepGivenAsCopies(mine, entries)
	entries = l.replicaOf(hashes, entries)
	return entries, nil
}

// keepGivenAsCopies keeps the states among entries of keys (this node
// owns them by its ring) that FetchMoved gives away, with what this node
// would act on for their owner: their checks go to the fetching node now,
// and should it be unreachable next (it was leaving, say), this node acts
// for it on them rather than from nothing (acting.go). They are not
// copies to give: a later fetch gets nothing of them. A stale one merges
// as the older state wherever it goes.
func (l *Limiter) keepGivenAsCopies(keys []uint64, entries []store.Entry) {
	if l.repl.acting == nil || len(keys) == 0 {
		return
	}
	now := l.clock().UnixNano()
	for _, e := range entries {
		if slices.Contains(keys, e.Key) {
			_ = l.repl.acting.Import(e, now) // an invalid state was refused when it came
		}
	}
}

// holds reports whether this node holds anything of hash: its state (in
// the store or travelling), or, as an heir, a copy or what it admitted
// acting for the owner. A caller this node does not know is refused such
// a key (FetchMoved): answered empty, it would count the key afresh.
func (l *Limiter) holds(now int64, hash uint64) bool {
	if l.store.Has(now, hash) || l.transit.has(hash) {
		return true
	}
	return l.repl.copies != nil && (l.repl.copies.Has(now, hash) || l.repl.acting.Has(now, hash))
}

// AcceptHandoff merges states pushed by node from, their previous owner,
// and records the partitions it has finished handing off. States that
// this node's ring gives a third node are passed on to it before
// AcceptHandoff returns (see passOn); if that third node does not take
// them, AcceptHandoff fails with ErrPeerUnavailable (they stay here too,
// and the sender keeps its copy). It returns how many states the
// store refused (full); a leaving node refuses them all with ErrLeaving.
//
// States from a caller that is not a member of this node's ring, nor one
// that left it less than the pending TTL ago, are refused with
// ErrNotMember and nothing is merged (its sender retries until this node's
// ring has it), except by a node not yet in a multi-node ring whose peer
// calls are authenticated (admitsHandoff). A call with only donePartitions is taken from any
// caller: it may come before this node's ring has the caller, and counts
// once the ring does (a pending partition waits for its ring's members).
// The caller's states that arrive later are passed on to this node, and
// passOn retries while this node refuses them.
func (l *Limiter) AcceptHandoff(ctx context.Context, from string, entries []store.Entry, donePartitions []int) (int, error) {
	if len(entries) > 0 {
		l.settleEpoch(ctx)
		if !l.admitsHandoff(from) {
			return 0, l.refuse("Handoff", from)
		}
	}
	// Adopting states and HandOff's acknowledgements exclude each other
	// (see handOffTo); passing states on, a peer call, is left outside. A
	// call with acknowledgements only adopts nothing and must not wait:
	// two nodes acknowledging to each other at once would each hold up
	// the other.
	if len(entries) > 0 {
		l.adopting.RLock()
	}
	v, refused, err := l.accept(from, entries, donePartitions)
	var onward map[string][]uint64
	if err == nil {
		onward = l.adopt(v, from, entries)
	}
	if len(entries) > 0 {
		l.adopting.RUnlock()
	}
	if err == nil {
		err = l.passOn(ctx, v, onward)
	}
	return refused, err
}

// accept is AcceptHandoff without passing on. It returns the view the
// states were accepted on.
func (l *Limiter) accept(from string, entries []store.Entry, donePartitions []int) (*view, int, error) {
	// Imports and SetLeaving exclude each other, so a state accepted here
	// is in the store before this node's final HandOff exports it.
	l.accepting.RLock()
	defer l.accepting.RUnlock()
	if l.leaving.Load() && len(entries) > 0 {
		return nil, len(entries), ErrLeaving
	}
	now := l.clock().UnixNano()
	v := l.view.Load()
	refused, invalid := 0, 0
	var firstInvalid error
	for _, e := range entries {
		if err := l.store.Import(e, now); errors.Is(err, store.ErrInvalidEntry) {
			// Not applied; the key's partition still settles: the sender
			// has nothing better to give.
			invalid++
			if firstInvalid == nil {
				firstInvalid = err
			}
		} else if err != nil {
			refused++
		}
		if v != nil && v.pending != nil {
			v.pending.settle(e.Key)
		}
	}
	if len(donePartitions) > 0 {
		l.acks.record(from, donePartitions)
	}
	if len(entries) > 0 && l.moved.n.Load() > 0 {
		// A key this node gave a fetching node comes back (that node's
		// ring has moved it away meanwhile, or it is leaving): its checks
		// are decided here again, not sent to a node that no longer
		// holds it.
		keys := make([]uint64, len(entries))
		for i, e := range entries {
			keys[i] = e.Key
		}
		l.moved.forget(keys)
	}
	if refused > 0 {
		l.log.Warn("handoff: states refused, store full", "from", from, "refused", refused)
	}
	if invalid > 0 {
		l.metrics.invalidStates.Add(float64(invalid))
		l.log.Warn("handoff: invalid states dropped", "from", from, "invalid", invalid, "first", firstInvalid)
	}
	return v, refused, nil
}

// SetLeaving marks this node as leaving the cluster: it refuses states
// handed to it from now on (ErrLeaving), so that nodes leaving together
// hand their keys to the nodes that stay.
// It returns once the handoffs being accepted have been stored.
func (l *Limiter) SetLeaving() {
	l.accepting.Lock()
	l.leaving.Store(true)
	l.accepting.Unlock()
}

// handoffBatch is how many states go in one Handoff call.
const handoffBatch = 1000

// HandOff pushes every state this node holds but no longer owns (by the
// ring in force) to its owner, then tells each owner which partitions are
// done. Each batch leaves the store while it travels; a batch an owner did
// not accept is put back (the owner fetches such keys on demand),
// and that owner is not told it is done. It returns how many states moved.
// The node calls it after each SetMembers and on graceful shutdown; calls
// are serialized.
func (l *Limiter) HandOff(ctx context.Context) (int, error) {
	// Grants first, outside handoffMu: an issuer's credit for a key it
	// has handed off waits for its HandOff (see Limiter.credit).
	if v := l.view.Load(); v != nil && v.ring != nil && l.peers != nil {
		l.returnMovedGrants(ctx, v)
	}
	l.handoffMu.Lock()
	defer l.handoffMu.Unlock()
	v := l.view.Load()
	if v == nil || v.ring == nil || l.peers == nil {
		return 0, nil
	}
	// Owners that refuse because they are leaving too are taken out of the
	// ring and the states go to the next owner, for a few rounds.
	r := v.ring
	moved := 0
	var err error
	for round := 0; round < 4; round++ {
		var leaving []string
		var n int
		n, leaving, err = l.handOffTo(ctx, v, r)
		moved += n
		if len(leaving) == 0 || ctx.Err() != nil {
			break
		}
		var keep []ring.Member
		for _, m := range r.Members() {
			if !slices.Contains(leaving, m.Name) {
				keep = append(keep, m)
			}
		}
		if len(keep) == 0 {
			break
		}
		if r, err = ring.New(l.ringCfg, keep); err != nil {
			break
		}
	}
	if moved > 0 {
		l.log.Info("handed off keys to their new owners", "states", moved)
	}
	return moved, err
}

// handOffTo is one round of HandOff with the owners of ring r. It returns
// the states moved and the owners that refused because they are leaving.
func (l *Limiter) handOffTo(ctx context.Context, v *view, r *ring.Ring) (int, []string, error) {
	owner := func(k uint64) (ring.Member, bool) {
		m, ok := r.Owner(k)
		return m, !ok || m.Name == l.name || l.adopted.has(k)
	}
	batches := map[string][]uint64{}
	failed := map[string]error{}
	moved := 0
	flush := func(name string, keys []uint64) {
		// A key adopted since it was exported stays (see adopt).
		keys = slices.DeleteFunc(keys, l.adopted.has)
		if len(keys) == 0 || failed[name] != nil {
			return
		}
		to, _ := r.Member(name)
		// The states leave the store before they travel, not once the
		// owner has them: a state handed back to this node while the
		// call is in flight (the owner's ring has moved on and gives it
		// here again) then lands in the store and stays.
		entries, travel := l.extractTravelling(l.clock().UnixNano(), keys)
		defer l.transit.done(travel)
		if len(entries) == 0 {
			return
		}
		if err := l.peers.Handoff(ctx, to, entries, nil); err != nil {
			l.putBack(entries)
			failed[name] = err
			if !errors.Is(err, ErrLeaving) {
				l.log.Log(ctx, churnLevel(err), "handoff to new owner failed; its keys stay here until fetched", "to", name, "err", err)
			}
			return
		}
		l.keepAsCopies(v, r, entries)
		parts := make([]int, len(entries))
		for i, e := range entries {
			parts[i] = r.Partition(e.Key)
		}
		l.acks.forget(name, parts)
		moved += len(entries)
		l.metrics.handedOff.Add(float64(len(entries)))
	}
	notMine := func(k uint64) bool {
		_, mine := owner(k)
		return !mine
	}
	l.store.Export(l.clock().UnixNano(), notMine, func(e store.Entry) bool {
		to, _ := owner(e.Key)
		batches[to.Name] = append(batches[to.Name], e.Key)
		if len(batches[to.Name]) >= handoffBatch {
			flush(to.Name, batches[to.Name])
			batches[to.Name] = batches[to.Name][:0]
		}
		return ctx.Err() == nil
	})
	for name, keys := range batches {
		flush(name, keys)
	}
	if err := ctx.Err(); err != nil {
		return moved, nil, err
	}
	// Copies of a departed owner's keys go to their new owners before
	// this node tells them it is done with those partitions.
	l.pushOrphans(ctx, v, r)
	// Tell every owner which partitions this node has finished with, but
	// for those of keys it has adopted: their owner on r handed them here
	// (its ring disagreed) and must fetch them from here when its ring
	// gives them back to it. No state is adopted while the
	// acknowledgements are worked out and sent: one adopted after they
	// were worked out would otherwise be covered by them, and the owner
	// would count it afresh. An adoption that waits for them is followed
	// by the owner forgetting them (acks.forget), once the handoff that
	// brought the state returns.
	l.adopting.Lock()
	defer l.adopting.Unlock()
	held := map[int]bool{}
	l.adopted.each(func(k uint64) { held[r.Partition(k)] = true })
	done := map[string][]int{}
	for p := 0; p < r.PartitionCount(); p++ {
		if m, ok := r.PartitionOwner(p); ok && m.Name != l.name && failed[m.Name] == nil && !held[p] {
			done[m.Name] = append(done[m.Name], p)
		}
	}
	for name, parts := range done {
		to, _ := r.Member(name)
		if err := l.peers.Handoff(ctx, to, nil, parts); err != nil {
			failed[name] = err
			l.log.Log(ctx, churnLevel(err), "handoff: could not confirm partitions", "to", name, "err", err)
		}
	}
	var leaving []string
	var err error
	for name, e := range failed {
		if errors.Is(e, ErrLeaving) {
			leaving = append(leaving, name)
		} else {
			err = ErrPeerUnavailable
		}
	}
	return moved, leaving, err
}
