package limiter

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// All-or-nothing checks (CheckAtomic): every item of the batch is charged,
// or none. The items are decided together on their owner, under the locks
// of all their keys' shards (store.TakeAll), so that under any concurrency
// no item is charged for a denied call and none is admitted past its
// limit. A batch whose keys all live on one node is decided there: here,
// or on their owner, to which the node asked forwards the batch
// (Peers.CheckAtomic). A batch whose keys live on several nodes, or whose
// owner's ring disagrees, is decided by reservations (atomicspread.go). An unreachable owner is an error wrapping ErrPeerUnavailable
// (no failure mode answers an atomic call). Grants are not used: every
// item goes to its owner's bucket.

// ErrAtomicElsewhere refuses an atomic batch whose keys do not all live on
// one node (or not on the node it was forwarded to): nothing was charged.
var ErrAtomicElsewhere = errors.New("limiter: atomic check of keys on several nodes")

// CheckAtomic decides reqs all or nothing. Validation is Check's, and also
// refuses up_to items and concurrency limits (a *FieldError naming
// "up_to" or "algorithm"). When one item is denied, every result has
// Allowed false, the denied ones their RetryAfter, and Remaining is what
// each key had, nothing having been charged. Results are appended to
// out[:0].
func (l *Limiter) CheckAtomic(ctx context.Context, reqs []Request, out []Result) ([]Result, error) {
	if len(reqs) == 0 || len(reqs) > MaxItems {
		return out[:0], tooManyItems(len(reqs))
	}
	set := l.policies.Load()
	jobs := make([]job, 0, len(reqs))
	var client string
	var clientTag uint64
	for i := range reqs {
		if reqs[i].Client != client {
			client, clientTag = reqs[i].Client, HolderTag(reqs[i].Client)
		}
		r, err := l.resolve(set, i, &reqs[i])
		if err != nil {
			return out[:0], err
		}
		if r.limit.Algorithm == bucket.Concurrency {
			return out[:0], &FieldError{i, "algorithm", "an atomic check takes no concurrency limit (leases are taken with Acquire)", ErrInvalid}
		}
		if reqs[i].UpTo {
			return out[:0], &FieldError{i, "up_to", "not in an atomic check", ErrInvalid}
		}
		jobs = append(jobs, job{hash: r.hash, limit: r.limit, cost: reqs[i].Cost, mode: r.mode, inline: r.inline(), client: clientTag})
	}
	out = out[:0]
	for i := range jobs {
		out = append(out, Result{Policy: reqs[i].Policy, Period: jobs[i].limit.Period, Quota: jobs[i].limit.Limit, Burst: jobs[i].limit.Capacity(),
			Source: SourceOwner, Owner: l.name})
		jobs[i].res = &out[i]
	}
	if err := l.decideAtomic(ctx, l.view.Load(), 0, jobs); err != nil {
		if !errors.Is(err, ErrAtomicElsewhere) || l.peers == nil {
			return out[:0], err
		}
		// Keys of several owners: reserve on each, then commit or cancel.
		if err := l.checkAtomicSpread(ctx, reqs, jobs, out); err != nil {
			return out[:0], err
		}
		return out, nil
	}
	l.metrics.observeBatch(reqs, out, jobs)
	return out, nil
}

// decideAtomic decides jobs all or nothing here, or forwards them to their
// one owner (only from the node asked: hops 0).
func (l *Limiter) decideAtomic(ctx context.Context, v *view, hops int, jobs []job) error {
	redirects := 0
	for {
		owner, mine := l.route(v, jobs[0].hash)
		for i := range jobs[1:] {
			if o, m := l.route(v, jobs[i+1].hash); m != mine || o.Name != owner.Name {
				return fmt.Errorf("%w: item 0's key is owned by %s, item %d's by %s", ErrAtomicElsewhere, owner.Name, i+1, o.Name)
			}
		}
		if !mine && l.peers != nil {
			if hops > 0 {
				return fmt.Errorf("%w: forwarded here, owned by %s", ErrAtomicElsewhere, owner.Name)
			}
			err := l.atomicRemote(ctx, owner, jobs)
			if nv := l.redirected(ctx, v, redirects, err); nv != nil {
				// The epoch's redirect (epochs.go): once, on the new ring.
				v, redirects = nv, 1
				continue
			}
			return err
		}
		nv, err := l.atomicLocal(ctx, v, jobs)
		if err != nil || nv == nil {
			return err
		}
		v = nv
	}
}

// atomicRemote sends jobs to their owner.
func (l *Limiter) atomicRemote(ctx context.Context, owner ring.Member, jobs []job) error {
	items := make([]Forwarded, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		items[i] = Forwarded{Hash: j.hash, Limit: j.limit, Cost: j.cost, Inline: j.inline, Client: j.client}
	}
	answers := make([]Answer, len(jobs))
	if err := l.peers.CheckAtomic(ctx, owner, 0, items, answers); err != nil {
		return err
	}
	for i := range jobs {
		res := jobs[i].res
		res.Result, res.Err, res.Owner = answers[i].Result, answers[i].Err, owner.Name
	}
	return nil
}

// CheckAtomicForwarded decides items all or nothing for another node
// (ErrNotMember if the caller is not one this node knows, as for
// CheckForwarded); ErrAtomicElsewhere when this node does not own every
// key.
func (l *Limiter) CheckAtomicForwarded(ctx context.Context, from string, hops int, items []Forwarded, out []Answer) error {
	if err := l.epochGate(ctx, hops, items); err != nil {
		return err
	}
	if err := l.checkPeer("CheckAtomic", from); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	jobs := make([]job, len(items))
	results := make([]Result, len(items))
	for i, it := range items {
		if it.Limit.Algorithm == bucket.Concurrency || it.UpTo || it.Return != 0 || it.Credit || it.Report || it.Acting {
			return fmt.Errorf("%w: item %d is not a plain check", ErrInvalid, i)
		}
		jobs[i] = job{hash: it.Hash, limit: it.Limit, cost: it.Cost, inline: it.Inline, client: it.Client, res: &results[i]}
	}
	if err := l.decideAtomic(ctx, l.view.Load(), hops+1, jobs); err != nil {
		return err
	}
	for i := range results {
		out[i] = Answer{Result: results[i].Result, Err: results[i].Err}
	}
	return nil
}

// atomicLocal decides jobs here on view v, as applyLocal decides one: once
// their states are here, under their stripes' read locks, on the view in
// force. It returns the view to decide on again when v changed.
func (l *Limiter) atomicLocal(ctx context.Context, v *view, jobs []job) (*view, error) {
	hashes := make([]uint64, len(jobs))
	for i := range jobs {
		hashes[i] = jobs[i].hash
	}
	for _, h := range hashes {
		if _, err := l.awaitState(ctx, v, h, ""); err != nil {
			return nil, err
		}
	}
	unlock := l.deciding.rlockKeys(hashes)
	defer unlock()
	if nv := l.view.Load(); nv != v {
		return nv, nil
	}
	if l.moved.n.Load() > 0 {
		for i, h := range hashes {
			if l.fetchedAway(v, h) {
				return nil, fmt.Errorf("%w: item %d's key has moved", ErrAtomicElsewhere, i)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	items := make([]store.AtomicItem, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		items[i] = store.AtomicItem{Key: j.hash, Limit: j.limit, Cost: j.cost, As: j.use()}
	}
	now := l.clock().UnixNano()
	for _, h := range hashes {
		if err := l.ownerGate(v, h, now); err != nil {
			return nil, err
		}
	}
	results := make([]bucket.Result, len(jobs))
	kept, err := l.store.TakeAll(items, now, results)
	for i := range jobs {
		res := jobs[i].res
		res.Result, res.Err = results[i], err
		if !kept {
			if res.Allowed {
				res.RetryAfter = 0
			}
			res.Allowed = false
		}
	}
	return nil, nil
}

// rlockKeys takes the read locks of the stripes of hashes, in stripe order
// (as lockAll and lockKeys take the write locks, so they never deadlock),
// and returns their release.
func (d *deciding) rlockKeys(hashes []uint64) func() {
	var held [decidingStripes]bool
	for _, h := range hashes {
		held[h%decidingStripes] = true
	}
	for i := range d.stripes {
		if held[i] {
			d.stripes[i].RLock()
		}
	}
	return func() {
		for i := range d.stripes {
			if held[i] {
				d.stripes[i].RUnlock()
			}
		}
	}
}
