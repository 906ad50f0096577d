package limiter

import (
	"context"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// The heir acts for an unreachable owner. A key's local share (FailLocal)
// knows nothing of the key's count: every node that cannot reach the owner
// admits up to limit/N of its own, so a key spent before its owner died
// admits (N-1)/N of its limit again before the ring moves it. With
// replication on, the first heir of the key holds a copy of its state as
// of the last round, so a node that cannot reach a key's owner sends the
// check to that heir instead (Forwarded.Acting), batched per heir, and the
// heir decides it on its copy merged with what it has admitted so acting
// (a store of its own, acting): every node's fallback for the key is then
// counted in one place, from the owner's count. The heir reports what it
// admitted so to the key's owner when it answers again (reconcile.go), so
// the owner's count reflects it, and when the ring gives the heir the key,
// it reports to itself: its store then holds the copy plus those
// admissions. Only when the heir cannot be reached either does the local
// share answer, as without replication.
//
// A heir that acts for an owner that is only cut off from some callers
// counts beside the owner: the two together admit at most the limit each
// until the heir's reports reach the owner (within a second while they can
// talk), as with local shares.

// unreachableAll answers jobs whose owner could not be reached: those the
// key's heirs can decide are sent to the first heir (or decided here when
// this node is that heir); those whose first heir cannot be reached
// either go to the next heir, and so on (with 2 or more heirs, the side of
// a split that cut off the owner and its first heir reaches a later heir,
// which holds a copy too); the others, and those no heir answered, go to
// unreachable.
func (l *Limiter) unreachableAll(ctx context.Context, v *view, hops int, jobs []*job, owner ring.Member, err error, now int64) {
	l.toHeir(ctx, v, hops, jobs, owner, err, now, 0)
}

// toHeir is unreachableAll from the k-th heir of each job's key on.
func (l *Limiter) toHeir(ctx context.Context, v *view, hops int, jobs []*job, owner ring.Member, err error, now int64, k int) {
	var byHeir map[string][]*job
	for _, j := range jobs {
		h, ok := l.heirFor(ctx, v, hops, j, owner, k)
		switch {
		case !ok:
			l.unreachable(ctx, v, hops, j, owner, err, now)
		case h.Name == l.name:
			l.actOnCopy(v, j, now)
			j.res.Owner = owner.Name
			l.metrics.fellBack(j.mode)
		default:
			if byHeir == nil {
				byHeir = map[string][]*job{}
			}
			byHeir[h.Name] = append(byHeir[h.Name], j)
		}
	}
	for name, group := range byHeir {
		heir, _ := v.ring.Member(name)
		items := make([]Forwarded, len(group))
		answers := make([]Answer, len(group))
		for i, j := range group {
			items[i] = Forwarded{Hash: j.hash, Limit: j.limit, Cost: j.cost, Acting: true, Inline: j.inline, Client: j.client}
		}
		// Half of what the owner's call left for the first heir, less
		// for each next: the rest stays for the local share.
		pctx, cancel := reserveContext(ctx, time.Duration(k+2))
		herr := l.peers.Check(pctx, heir, 0, items, answers)
		cancel()
		if herr != nil {
			l.log.Debug("heir unreachable too: next heir or local share", "owner", owner.Name, "heir", name, "err", herr)
			l.toHeir(ctx, v, hops, group, owner, err, now, k+1)
			continue
		}
		for i, j := range group {
			res := j.res
			res.Result, res.Err, res.Source, res.Owner = answers[i].Result, answers[i].Err, SourceFallback, owner.Name
			if res.Err != nil {
				res.Allowed = false
			}
			l.metrics.fellBack(j.mode)
		}
	}
}

// heirFor returns the node that decides j for its unreachable owner when
// the key's heirs before the k-th could not be reached: its k-th heir on
// v, if replication is on and j is a plain check of a FailLocal limit,
// other than a concurrency lease, sent by this node's own caller.
func (l *Limiter) heirFor(ctx context.Context, v *view, hops int, j *job, owner ring.Member, k int) (ring.Member, bool) {
	if hops > 0 || ctx.Err() != nil || v == nil || v.heirs == nil || j.mode != policy.FailLocal ||
		j.upTo || j.credit || j.report || j.limit.Algorithm == bucket.Concurrency {
		return ring.Member{}, false
	}
	if k == 0 && l.gaveAway(v, j.hash) {
		return ring.Member{Name: l.name}, true
	}
	h, ok := v.heirs.Heir(j.hash, k)
	if !ok || h.Name == owner.Name {
		return ring.Member{}, false
	}
	return h, true
}

// gaveAway reports whether this node owns hash on v but gave its state to
// a node that fetched it (FetchMoved): for that node this node is the
// key's heir, on the state it kept (keepGivenAsCopies), whatever the ring
// says of the key's heirs.
func (l *Limiter) gaveAway(v *view, hash uint64) bool {
	if v == nil || v.ring == nil || l.repl.copies == nil {
		return false
	}
	if _, mine := v.owner(l.name, hash); !mine {
		return false
	}
	_, moved := l.moved.get(hash)
	return moved
}

// isHeir reports whether this node is the first heir of j's key on v and
// j is a check it may decide on its copy (see heirFor).
func (l *Limiter) isHeir(v *view, j *job) bool {
	if v == nil || v.heirs == nil || j.mode != policy.FailLocal || j.upTo || j.credit || j.report ||
		j.limit.Algorithm == bucket.Concurrency {
		return false
	}
	return l.firstHeir(v, j.hash) || l.gaveAway(v, j.hash)
}

// laterHeir reports whether this node is neither the owner nor the first
// heir of hash on v: it acts for the key only when its earlier heirs could
// not be reached (toHeir).
func (l *Limiter) laterHeir(v *view, hash uint64) bool {
	if _, mine := v.owner(l.name, hash); mine {
		return false
	}
	return !l.firstHeir(v, hash)
}

// firstHeir reports whether this node is the first heir of hash on v.
func (l *Limiter) firstHeir(v *view, hash uint64) bool {
	if v == nil || v.heirs == nil {
		return false
	}
	h, ok := v.heirs.Heir(hash, 0)
	return ok && h.Name == l.name
}

// decideActing answers checks sent to this node as their keys' heir: as
// the owner if its ring makes it the owner by now, else on its copy.
func (l *Limiter) decideActing(ctx context.Context, v *view, hops int, jobs []job, now int64) {
	for i := range jobs {
		j := &jobs[i]
		if _, mine := l.route(v, j.hash); mine {
			l.decide(ctx, v, hops+1, true, jobs[i:i+1], now)
			continue
		}
		l.actOnCopy(v, j, now)
	}
}

// actOnCopy decides j on this node's copy of its key (or the key's state,
// if it holds one), merged with what it admitted acting for the owner so
// far, and notes an admission for the owner (reconcile.go). Without a copy store (replication off here) the
// local share answers.
func (l *Limiter) actOnCopy(v *view, j *job, now int64) {
	res := j.res
	res.Source, res.Owner, res.Err = SourceFallback, l.name, nil
	if l.repl.acting == nil {
		res.Result = l.fallbackTake(v, policy.FailLocal, j.hash, j.limit, j.cost, now)
		l.noteFallback(j, policy.FailLocal)
		return
	}
	if !l.leaseHeld(now) {
		// Cut off from the majority: the side that holds it acts on a
		// copy of its own (a later heir's) and takes the key over, so
		// this side answers from the local share, no more, and less
		// when the state, copy or acting count here already denies.
		for _, st := range []*store.Store{l.store, l.repl.copies, l.repl.acting} {
			if r, ok := deniesOn(st, j, now); ok {
				res.Result = r
				return
			}
		}
		res.Result = l.fallbackTake(v, policy.FailLocal, j.hash, j.limit, j.cost, now)
		l.noteFallback(j, policy.FailLocal)
		return
	}
	// The copy, and the key's own state if this node holds one (it owned
	// the key until the ring moved it, and has not handed it off yet, or
	// is handing it off now: see transit, or took its copy over): acting
	// from nothing would count it afresh.
	keys := []uint64{j.hash}
	states := append(l.repl.copies.Copy(now, keys), l.store.Copy(now, keys)...)
	states = append(states, l.transit.appendMissing(keys, nil)...)
	if len(states) == 0 && l.laterHeir(v, j.hash) && len(l.repl.acting.Copy(now, keys)) == 0 {
		// A later heir that holds nothing of the key (one that has just
		// joined, or that the first round of replication on a new ring
		// has not reached) would count it afresh: its local share answers.
		res.Result = l.fallbackTake(v, policy.FailLocal, j.hash, j.limit, j.cost, now)
		l.noteFallback(j, policy.FailLocal)
		return
	}
	for _, e := range states {
		_ = l.repl.acting.Import(e, now) // an invalid state was refused when it came
	}
	r, err := l.repl.acting.TakeAs(j.hash, j.limit, now, j.cost, store.Use{Kind: j.use().Kind})
	if err != nil {
		res.Result = bucket.Result{Limit: j.limit.Capacity(), RetryAfter: FallbackRetryAfter}
		return
	}
	res.Result = r
	l.noteFallback(j, policy.FailLocal)
}
