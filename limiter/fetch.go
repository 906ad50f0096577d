package limiter

import (
	"context"
	"strconv"
	"sync"

	"github.com/sluice-rl/sluice/ring"
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
//     reached).
//
// Concurrent checks of one key share one fetch.
func (l *Limiter) awaitState(ctx context.Context, v *view, hash uint64, unreachable string) {
	if v == nil || v.ring == nil || l.peers == nil {
		return
	}
	if owner, mine := l.route(v, hash); !mine {
		l.awaitStray(ctx, v, hash, owner, unreachable)
		return
	}
	if v.pending == nil {
		return
	}
	part := v.ring.Partition(hash)
	if hs, _ := v.pending.from(part, hash, true); len(hs) == 0 {
		return
	}
	_, _, _ = l.fetches.Do(strconv.FormatUint(hash, 16), func() (any, error) {
		hs, first := v.pending.from(part, hash, true)
		if len(hs) == 0 {
			return nil, nil // settled while this call waited its turn
		}
		if first {
			if l.fetchFrom(ctx, v.pending, hs[:1], hash) {
				hs = nil
			} else {
				hs = hs[1:]
			}
		}
		if len(hs) > 0 {
			l.fetchFrom(ctx, v.pending, hs, hash)
		}
		v.pending.settle(hash)
		return nil, nil
	})
}

// awaitStray fetches hash, which this node decides although its ring gives
// it to owner, unless the key has a state here.
func (l *Limiter) awaitStray(ctx context.Context, v *view, hash uint64, owner ring.Member, unreachable string) {
	if l.store.Has(l.clock().UnixNano(), hash) {
		return
	}
	_, _, _ = l.fetches.Do(strconv.FormatUint(hash, 16), func() (any, error) {
		if l.store.Has(l.clock().UnixNano(), hash) {
			return nil, nil
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
		if len(first) > 0 && l.fetchFrom(ctx, nil, first, hash) {
			return nil, nil
		}
		if len(rest) > 0 {
			l.fetchFrom(ctx, nil, rest, hash)
		}
		return nil, nil
	})
}

// fetchFrom fetches hash from each of holders concurrently, merges what
// they return into the store and reports whether any returned a state.
// A holder that cannot be reached is given up in p, if p is not nil.
func (l *Limiter) fetchFrom(ctx context.Context, p *pending, holders []ring.Member, hash uint64) bool {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.fetchTimeout)
	defer cancel()
	var mu sync.Mutex
	found := false
	fetch := func(from ring.Member) {
		entries, err := l.peers.Fetch(fctx, from, []uint64{hash})
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
				l.log.Warn("fetched state refused", "from", from.Name, "err", err)
			}
		}
		mu.Lock()
		found = found || len(entries) > 0
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, h := range holders[1:] {
		wg.Go(func() { fetch(h) })
	}
	fetch(holders[0])
	wg.Wait()
	return found
}
