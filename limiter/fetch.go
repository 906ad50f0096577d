package limiter

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// awaitState is called before this node decides hash. If the key's state
// may still be on another node, it fetches it first:
//   - hash's partition is pending (just gained): from the partition's
//     previous owner first and, if that node had nothing, from every other
//     node that has not acknowledged the partition yet, at once;
//   - this node's ring gives the key to another node (it was forwarded
//     here by a node whose ring disagrees, and its hops are spent) and the
//     key has no state here: from the owner on this ring first, then from
//     every other member but unreachable (an owner that could not be
//     reached); except on a node that has left its own ring (it is
//     leaving), which fetches nothing back and returns the owner and
//     ErrStateElsewhere.
//
// Concurrent checks of one key share one fetch.
//
// A holder that refuses the fetch because this node is not a member of
// its ring yet (it has not seen this node join) may hold the key's count:
// the key then stays unsettled (the next check asks again) and
// awaitState returns that holder and its error, so that the check is
// answered by the limit's failure mode rather than counted afresh here.
// So does a holder ahead of this node's epoch that redirects the fetch
// (the key has moved on): this node first waits, up to CatchUpWait, to
// apply that epoch, and its caller decides the key on the new ring if it
// did (applyLocal).
func (l *Limiter) awaitState(ctx context.Context, v *view, hash uint64, unreachable string) (refusedBy ring.Member, err error) {
	if v == nil || v.ring == nil || l.peers == nil {
		return ring.Member{}, nil
	}
	if owner, mine := l.route(v, hash); !mine {
		if l.outOfRing(v) && !l.store.Has(l.clock().UnixNano(), hash) {
			// Leaving, its handoff done or under way: a state fetched
			// back from the owner would leave with this node, and the
			// owner count the key afresh (see leavingForwards).
			return owner, ErrStateElsewhere
		}
		return l.awaitStray(ctx, v, hash, owner, unreachable)
	}
	if v.pending == nil {
		return ring.Member{}, nil
	}
	part := v.ring.Partition(hash)
	if hs, _ := v.pending.from(part, hash, true); len(hs) == 0 {
		return ring.Member{}, nil
	}
	out, _, _ := l.fetches.Do(strconv.FormatUint(hash, 16), func() (any, error) {
		hs, first := v.pending.from(part, hash, true)
		if len(hs) == 0 {
			return fetchOutcome{}, nil // settled while this call waited its turn
		}
		var o fetchOutcome
		if first {
			if o = l.fetchFrom(ctx, v.pending, hs[:1], hash); o.found {
				hs = nil
			} else {
				hs = hs[1:]
			}
		}
		if len(hs) > 0 {
			o = o.and(l.fetchFrom(ctx, v.pending, hs, hash))
		}
		if o.found || o.err == nil {
			v.pending.settle(hash)
			o.err = nil
		}
		return o, nil
	})
	o, _ := out.(fetchOutcome)
	return o.refusedBy, o.err
}

// isMember reports whether node name is in this node's ring now.
func (l *Limiter) isMember(name string) bool {
	v := l.view.Load()
	if v == nil || v.ring == nil {
		return false
	}
	_, ok := v.ring.Member(name)
	return ok
}

// fetchOutcome is what fetching one key from its holders found: whether
// any returned a state, and the first holder that refused the fetch (as
// coming from a node outside its ring, or redirected it), if any, with
// its error.
type fetchOutcome struct {
	found     bool
	refusedBy ring.Member
	err       error
}

// and combines two outcomes of the same key.
func (o fetchOutcome) and(p fetchOutcome) fetchOutcome {
	o.found = o.found || p.found
	if o.err == nil {
		o.refusedBy, o.err = p.refusedBy, p.err
	}
	return o
}

// awaitStray fetches hash, which this node decides although its ring gives
// it to owner, unless the key has a state here.
func (l *Limiter) awaitStray(ctx context.Context, v *view, hash uint64, owner ring.Member, unreachable string) (ring.Member, error) {
	if l.store.Has(l.clock().UnixNano(), hash) {
		return ring.Member{}, nil
	}
	out, _, _ := l.fetches.Do(strconv.FormatUint(hash, 16), func() (any, error) {
		if l.store.Has(l.clock().UnixNano(), hash) {
			return fetchOutcome{}, nil
		}
		var first, rest []ring.Member
		for _, m := range v.ring.Members() {
			switch m.Name {
			case l.name, unreachable:
			case owner.Name:
				first = append(first, m)
			default:
				rest = append(rest, m)
			}
		}
		var o fetchOutcome
		if len(first) > 0 {
			if o = l.fetchFrom(ctx, nil, first, hash); o.found {
				return fetchOutcome{}, nil
			}
		}
		if o.err == nil && l.copyToStore(hash) {
			// This node is an heir of the key: its copy, and what it
			// admitted acting for the owner, are the count to go on from.
			return fetchOutcome{}, nil
		}
		if len(rest) > 0 {
			o = o.and(l.fetchFrom(ctx, nil, rest, hash))
		}
		if o.found {
			o.err = nil
		}
		return o, nil
	})
	o, _ := out.(fetchOutcome)
	return o.refusedBy, o.err
}

// copyToStore merges this node's copy of hash, and what it admitted acting
// for the key's owner, into its store (the copies stay until promote or a
// fetch takes them), and reports whether there was either.
func (l *Limiter) copyToStore(hash uint64) bool {
	if l.repl.copies == nil {
		return false
	}
	now := l.clock().UnixNano()
	keys := []uint64{hash}
	found := false
	for _, e := range append(l.repl.copies.Copy(now, keys), l.repl.acting.Copy(now, keys)...) {
		if l.store.Import(e, now) == nil {
			found = true
		}
	}
	return found
}

// fetchFrom fetches hash from each of holders concurrently, merges what
// they return into the store and reports whether any returned a state. A
// holder that cannot be reached is given up in p, if p is not nil; one
// that refuses because this node is not in its ring (ErrNotMember), or
// redirects because it is ahead of this node's epoch, is not, and is
// reported in the outcome (after a redirect, once this node has caught up
// with the holder's epoch or CatchUpWait has passed).
func (l *Limiter) fetchFrom(ctx context.Context, p *pending, holders []ring.Member, hash uint64) fetchOutcome {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.fetchTimeout)
	defer cancel()
	var mu sync.Mutex
	var out fetchOutcome
	fetch := func(from ring.Member) {
		entries, err := l.peers.Fetch(fctx, from, []uint64{hash})
		var ee *EpochError
		if errors.As(err, &ee) && ee.Ahead {
			l.catchUpTo(ctx, ee.Epoch)
			mu.Lock()
			out = out.and(fetchOutcome{refusedBy: from, err: err})
			mu.Unlock()
			return
		}
		if errors.Is(err, ErrNotMember) {
			l.log.Debug("holder has not seen this node yet; its keys answer from their failure mode", "from", from.Name)
			mu.Lock()
			out = out.and(fetchOutcome{refusedBy: from, err: err})
			mu.Unlock()
			return
		}
		if err != nil && l.isMember(from.Name) {
			// A live member that did not answer in time (its connection
			// is still coming up after a restart, say) may hold the
			// key's count: the check is answered by the failure mode
			// and the key asks again next time, rather than start
			// afresh here.
			l.log.Debug("node that may hold keys did not answer; its keys answer from their failure mode", "from", from.Name, "err", err)
			mu.Lock()
			out = out.and(fetchOutcome{refusedBy: from, err: err})
			mu.Unlock()
			return
		}
		if err != nil {
			l.log.Warn("node that may hold keys unreachable; its keys start afresh here", "from", from.Name, "err", err)
			if p != nil {
				p.giveUp(from.Name)
			}
			return
		}
		now := l.clock().UnixNano()
		for _, e := range entries {
			if err := l.store.Import(e, now); err != nil {
				if errors.Is(err, store.ErrInvalidEntry) {
					l.metrics.invalidStates.Inc()
				}
				l.log.Warn("fetched state refused", "from", from.Name, "err", err)
			}
		}
		mu.Lock()
		out.found = out.found || len(entries) > 0
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, h := range holders[1:] {
		wg.Go(func() { fetch(h) })
	}
	fetch(holders[0])
	wg.Wait()
	return out
}
