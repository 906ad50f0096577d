package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Check decides a batch of requests. Every item is validated before any is
// applied: an invalid item fails the whole call with a *FieldError and
// nothing is consumed. Each valid item is then decided on its own, here if
// this node owns its key, else by its owner. Results are appended to
// out[:0] and returned.
func (l *Limiter) Check(ctx context.Context, reqs []Request, out []Result) ([]Result, error) {
	if len(reqs) == 0 || len(reqs) > MaxItems {
		return out[:0], tooManyItems(len(reqs))
	}
	set := l.policies.Load()
	// The jobs escape (to the forwarding goroutines, which are done when
	// decide returns, as with out), so small batches reuse pooled ones.
	var jobs []job
	if len(reqs) <= smallBatch {
		small, _ := l.smallJobs.Get().(*[smallBatch]job)
		if small == nil {
			small = new([smallBatch]job)
		}
		defer func() {
			*small = [smallBatch]job{}
			l.smallJobs.Put(small)
		}()
		jobs = small[:0]
	} else {
		jobs = make([]job, 0, len(reqs))
	}
	var client string
	var clientTag uint64
	for i := range reqs {
		if reqs[i].Client != client { // one SHA-256 per identity, not per item
			client, clientTag = reqs[i].Client, HolderTag(reqs[i].Client)
		}
		r, err := l.resolve(set, i, &reqs[i])
		if err != nil {
			return out[:0], err
		}
		if r.limit.Algorithm == bucket.Concurrency && reqs[i].Cost > 0 {
			return out[:0], &FieldError{i, "algorithm", "concurrency limits are taken with Acquire and Release; Check may only read them (cost 0)", ErrInvalid}
		}
		if reqs[i].UpTo {
			if err := grantValid(i, r.limit, reqs[i].Cost, "up_to", "cost"); err != nil {
				return out[:0], err
			}
		}
		jobs = append(jobs, job{hash: r.hash, limit: r.limit, cost: reqs[i].Cost, upTo: reqs[i].UpTo, mode: r.mode, grants: r.grants, inline: r.inline(), client: clientTag})
	}
	out = out[:0]
	for i := range jobs {
		out = append(out, Result{Policy: reqs[i].Policy, Period: jobs[i].limit.Period, Quota: jobs[i].limit.Limit, Burst: jobs[i].limit.Capacity()})
	}
	for i := range jobs {
		jobs[i].res = &out[i]
	}
	l.decide(ctx, l.view.Load(), 0, false, jobs, l.clock().UnixNano())
	for i := range jobs {
		if j := &jobs[i]; j.upTo && out[i].Err == nil {
			out[i].Granted = Granted{Tokens: j.granted, ID: j.grantID, Issuer: j.issuer}
			// Allowed means some tokens were granted, never none: the
			// Go client reads an allowed answer with none granted as
			// from a node that predates up_to (it spent them all).
			out[i].Allowed = j.granted > 0
		}
	}
	l.metrics.observeBatch(reqs, out, jobs)
	return out, nil
}

// grantValid checks a grant (or a return) of n units of lim, item i of a
// request: a token bucket, and 1 to its capacity. algField and nField name
// the fields an error names (Check: "up_to" and "cost"; Grant:
// "algorithm" and "want").
func grantValid(i int, lim bucket.Limit, n int64, algField, nField string) error {
	if lim.Calendar != bucket.NoCalendar {
		return &FieldError{i, algField, "grants take a token bucket with a period, not a calendar limit", ErrInvalid}
	}
	if lim.Algorithm != bucket.TokenBucket {
		return &FieldError{i, algField, "grants take a token bucket, not " + lim.Algorithm.String(), ErrInvalid}
	}
	if n <= 0 || n > lim.Capacity() {
		return &FieldError{i, nField, "must be between 1 and the limit's capacity", ErrInvalid}
	}
	return nil
}

// smallBatch is the most items of a Check whose jobs come from
// Limiter.smallJobs (a pool of *[smallBatch]job).
const smallBatch = 8

// job is one item being decided; res receives the answer.
type job struct {
	hash  uint64
	limit bucket.Limit
	cost  int64
	mode  policy.FailureMode
	// grants is the limit's grant mode; upTo marks a grant request from
	// another node, and granted receives what it was given.
	grants  policy.GrantMode
	upTo    bool
	granted int64
	// grantID and issuer name the grant given to an upTo job; credit
	// marks a job that adds cost tokens back (see grantreturn.go).
	grantID uint64
	issuer  string
	credit  bool
	report  bool   // a fallback report (see reconcile.go)
	inline  bool   // the limit is inline: the key is store.Evictable
	client  uint64 // the client's tag (HolderTag), 0 for none
	hops    int    // earlier forwards of the job, when decided here
	acting  bool   // sent to this node as the key's heir (see acting.go)
	// maybeApplied marks a credit or report whose owner did not answer
	// after the call may have reached it: it is never sent again.
	maybeApplied bool
	// routedMine marks a job that decide routed to this node as the
	// key's owner (not one decided here only because its hops are spent).
	routedMine bool
	owner      ring.Member
	res        *Result
}

// route returns the node that should decide hash, and whether it is this
// one: its owner on the ring, unless the key was fetched away (moved) or
// handed here by that owner (adopted) since the ring was built.
func (l *Limiter) route(v *view, hash uint64) (ring.Member, bool) {
	owner, mine := v.owner(l.name, hash)
	if mine {
		if to, ok := l.moved.get(hash); ok {
			return to, false
		}
	} else if l.adopted.has(hash) {
		return ring.Member{Name: l.name}, true
	}
	return owner, mine
}

// decide answers jobs: those this node owns here, the others through their
// owners. forceLocal applies every job here (a forwarded item whose hop
// budget is spent), unless this node is leaving (see leavingForwards).
func (l *Limiter) decide(ctx context.Context, v *view, hops int, forceLocal bool, jobs []job, now int64) {
	forceLocal = forceLocal && !l.leavingForwards(v, hops)
	var remote []*job
	for i := range jobs {
		j := &jobs[i]
		owner, mine := l.route(v, j.hash)
		if mine || forceLocal || l.peers == nil {
			j.hops, j.routedMine = hops, mine
			l.applyLocal(ctx, v, j, now)
			continue
		}
		if hops == 0 && !j.upTo && !j.credit && !j.report && l.useGrant(ctx, v, j, owner, now) {
			continue
		}
		j.owner = owner
		remote = append(remote, j)
	}
	if len(remote) > 0 {
		l.forward(ctx, v, hops, remote, now)
	}
}

// beforeTake, if not nil, runs in applyLocal between a key's route and its
// take (tests only: export_test.go).
var beforeTake func(*Limiter)

// movedOn decides j on nv, the ring that replaced v while awaitState
// waited for the key's state, if nv has moved the key that this node owned
// on v to another node: the handoff of nv has sent what this node held of
// the key by then, and may have told the new owner that there is nothing
// more here, so deciding j on v would count the key here, beside its new
// owner. It passes on to the new owner what the fetch brought, sends j
// there, and reports whether it did. A credit, a report or an acting
// check are decided as before.
func (l *Limiter) movedOn(ctx context.Context, v, nv *view, j *job, now int64) bool {
	if j.credit || j.report || j.acting {
		return false
	}
	owner, gone, err := l.passOnMoved(ctx, v, nv, j.hash)
	if !gone {
		return false
	}
	if err != nil {
		l.fallback(nv, j, owner, err, now)
		return true
	}
	moved := []job{*j}
	moved[0].owner = ring.Member{}
	l.decide(ctx, nv, j.hops, false, moved, now)
	j.granted, j.grantID, j.issuer, j.maybeApplied = moved[0].granted, moved[0].grantID, moved[0].issuer, moved[0].maybeApplied
	return true
}

// passOnMoved passes on to hash's owner on nv what this node holds of it,
// if this node owned it on v and nv moved it elsewhere (see movedOn), and
// reports that owner, whether the key moved, and the pass-on's error.
func (l *Limiter) passOnMoved(ctx context.Context, v, nv *view, hash uint64) (ring.Member, bool, error) {
	if _, was := l.route(v, hash); !was {
		return ring.Member{}, false, nil
	}
	owner, mine := l.route(nv, hash)
	if mine {
		return ring.Member{}, false, nil
	}
	// What the fetch brought is the key's count, not the caller's: it goes
	// on even if the caller has given up (a state put back here after this
	// node's handoff would stay where the new owner does not look).
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), passOnNoDeadline)
	defer cancel()
	return owner, true, l.passOnTo(pctx, nv.ring, owner, []uint64{hash})
}

// leavingHops bounds the hops of an item that leaving nodes send on (see
// leavingForwards): two leaving nodes whose rings still name each other
// would pass it back and forth.
const leavingHops = 3

// leavingForwards reports whether this node, given an item whose hop budget
// is spent, sends it on to the key's owner on its ring rather than decide
// it: it does while it is leaving (its ring no longer has it), up to
// leavingHops. A leaving node has handed its keys off, or is handing them
// off: deciding a key it does not own would fetch the key's state from its
// owner (or find it in transit and count it afresh), and the count would
// leave with it. Its owner decides the item instead.
func (l *Limiter) leavingForwards(v *view, hops int) bool {
	return hops <= leavingHops && l.outOfRing(v)
}

// outOfRing reports whether v's ring has other nodes but not this one:
// this node is leaving.
func (l *Limiter) outOfRing(v *view) bool {
	if v == nil || v.ring == nil || v.ring.Len() == 0 || l.peers == nil {
		return false
	}
	_, member := v.ring.Member(l.name)
	return !member
}

// applyLocal decides one job on this node's store, first fetching the key's
// state if it may be on another node (see awaitState). j.owner, if set, is
// an owner that could not be reached. A job whose ctx has ended is not
// applied: its caller has given up on the answer (a forwarding node has
// then answered it by the failure mode), so counting it would count it
// twice, or spend grant tokens no one holds.
func (l *Limiter) applyLocal(ctx context.Context, v *view, j *job, now int64) {
	if err := l.ownerGate(v, j.hash, now); err != nil {
		l.notOwner(v, j, err, now)
		return
	}
	if holder, err := l.awaitState(ctx, v, j.hash, j.owner.Name); err != nil {
		if nv := l.view.Load(); nv != v && errors.Is(err, ErrEpochAhead) {
			// A holder ahead of this node's epoch redirected the fetch,
			// and this node has caught up: the key is decided on the
			// new ring (by its new owner, or here again).
			if !l.movedOn(ctx, v, nv, j, now) {
				l.applyLocal(ctx, nv, j, now)
			}
			return
		}
		// A node that may hold the key's count has not seen this one
		// join: answer as if the owner were unreachable. A check
		// forwarded here goes back to its sender, which asks the key's
		// heir: the node that still owns it on the sender's ring.
		if j.hops > 0 && !j.acting {
			res := j.res
			res.Result = bucket.Result{Limit: j.limit.Capacity()}
			res.Source, res.Owner, res.Err = SourceFallback, holder.Name, ErrStateElsewhere
			return
		}
		if j.upTo || j.credit || j.report {
			res := j.res
			res.Result = bucket.Result{Limit: j.limit.Capacity()}
			res.Source, res.Owner, res.Err = SourceFallback, holder.Name, err
			return
		}
		if l.isHeir(v, j) {
			// This node keeps a copy of the key: it answers on it, as
			// it does for nodes that cannot reach the owner.
			l.actOnCopy(v, j, now)
			j.res.Owner = holder.Name
			l.metrics.fellBack(j.mode)
			return
		}
		if r, ok := l.heldDenies(j, now); ok {
			res := j.res
			res.Result, res.Source, res.Owner, res.Err = r, SourceFallback, holder.Name, nil
			return
		}
		l.fallback(v, j, holder, err, now)
		return
	}
	if beforeTake != nil {
		beforeTake(l)
	}
	// The view may have changed since j was routed (while awaitState
	// waited, or just now): decide on the view in force, under the key's
	// stripe, so that no handoff of a newer view takes the state out of
	// the store before the take (see deciding.go).
	st := l.deciding.of(j.hash)
	st.RLock()
	for nv := l.view.Load(); nv != v; nv = l.view.Load() {
		st.RUnlock()
		if l.movedOn(ctx, v, nv, j, now) {
			return
		}
		v = nv
		st.RLock()
	}
	if j.routedMine && !j.acting && l.moved.n.Load() > 0 && l.fetchedAway(v, j.hash) {
		// Fetched away since it was routed (FetchMoved marks it moved
		// under the stripe's write lock): the fetcher has the state.
		st.RUnlock()
		again := []job{*j}
		again[0].owner = ring.Member{}
		l.decide(ctx, v, j.hops, false, again, now)
		j.granted, j.grantID, j.issuer, j.maybeApplied = again[0].granted, again[0].grantID, again[0].issuer, again[0].maybeApplied
		return
	}
	l.take(ctx, v, j, now)
	st.RUnlock()
}

// fetchedAway reports whether hash, routed to this node on v, now routes
// elsewhere: a node fetched it meanwhile (FetchMoved). The caller holds
// hash's stripe.
func (l *Limiter) fetchedAway(v *view, hash uint64) bool {
	_, mine := l.route(v, hash)
	return !mine
}

// take decides j on this node's store, on view v (applyLocal).
func (l *Limiter) take(ctx context.Context, v *view, j *job, now int64) {
	res := j.res
	res.Source, res.Owner, res.Err = SourceOwner, l.name, nil
	if err := ctx.Err(); err != nil {
		res.Result = bucket.Result{Limit: j.limit.Capacity()}
		res.Err = err
		return
	}
	var err error
	switch {
	case j.credit:
		j.granted, res.Result, err = l.store.GiveBack(j.hash, j.limit, now, j.cost)
		if _, mine := l.route(v, j.hash); err == nil && j.granted == 0 && !mine && !l.store.Has(now, j.hash) {
			// Decided here because rings disagree, with no state here:
			// the state is elsewhere. Applied nothing; the issuer retries.
			err = errCreditElsewhere
		}
	case j.report && j.limit.Algorithm == bucket.TokenBucket:
		j.granted, res.Result, err = l.store.TakeUpToAs(j.hash, j.limit, now, j.cost, j.use())
		res.Allowed = true // counted as far as the bucket goes: never denied
	case j.upTo:
		j.granted, res.Result, err = l.store.TakeUpToAs(j.hash, j.limit, now, j.cost, j.use())
		if err == nil && j.granted > 0 {
			j.grantID, j.issuer = l.ledger.record(j.hash, j.granted, now, now+int64(l.grants.Config().TTL)), l.name
		}
	case j.limit.Algorithm == bucket.Concurrency:
		// Cost 0 on a concurrency limit reads the in-flight count.
		_, res.Result, err = l.store.Acquire(j.hash, j.limit, now, 0, time.Second)
	default:
		res.Result, err = l.store.TakeAs(j.hash, j.limit, now, j.cost, j.use())
	}
	if err != nil {
		if errors.Is(err, store.ErrClientFull) {
			err = fmt.Errorf("%w: the client identity has %d live keys on this node, the cap of sluice serve --max-keys-per-client %d", store.ErrClientFull, l.maxKeysPerClient, l.maxKeysPerClient)
		}
		res.Err, res.Allowed = err, false
	} else if res.Remaining == 0 && (res.Allowed || j.granted > 0) {
		l.spentOut()
	}
}

// use says how j uses its key in the store: evictable for an inline
// limit, and for which client.
func (j *job) use() store.Use {
	u := store.Use{Client: j.client}
	if j.inline {
		u.Kind = store.Evictable
	}
	return u
}
