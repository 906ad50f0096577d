package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/ring"
)

// forward sends jobs to their owners, one concurrent call per owner, and
// reroutes those whose owner changed if a call fails.
func (l *Limiter) forward(ctx context.Context, v *view, hops int, jobs []*job, now int64) {
	groups := groupByOwner(jobs)
	if len(groups) == 1 {
		l.forwardGroup(ctx, v, hops, groups[0], now)
		return
	}
	done := make(chan struct{}, len(groups)-1)
	for _, g := range groups[1:] {
		go func() {
			l.forwardGroup(ctx, v, hops, g, now)
			done <- struct{}{}
		}()
	}
	l.forwardGroup(ctx, v, hops, groups[0], now)
	for range groups[1:] {
		<-done
	}
}

// Deadline reserve: by default a caller whose deadline passes while its
// key's owner is slow gets the deadline's error (the owner did not fail,
// the caller gave up). A caller that would rather have the failure mode's
// answer in time (the Envoy RLS, whose client treats a late answer as an
// error) marks its context with FallBackBeforeDeadline: a call to an
// owner then ends a reserve before the caller's deadline (a tenth of the
// time left, from 1ms to 50ms), and the failure mode answers if the owner
// has not. The reserve must cover the call to the heir, the local share
// and the reply's way back on a loaded machine (10ms, the cap before,
// was not always enough for a 500ms deadline).
const (
	minReserve = time.Millisecond
	maxReserve = 50 * time.Millisecond
)

type fallBackKey struct{}

// FallBackBeforeDeadline marks ctx so that checks made with it whose owner
// does not answer before ctx's deadline, less a reserve, are answered by
// their failure mode (SourceFallback) rather than with the deadline's
// error.
func FallBackBeforeDeadline(ctx context.Context) context.Context {
	return context.WithValue(ctx, fallBackKey{}, true)
}

// peerContext is the context of a call to an owner: ctx, with its deadline
// moved earlier by the reserve when ctx is marked FallBackBeforeDeadline.
func peerContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return reserveContext(ctx, 1)
}

// reserveContext is ctx with its deadline moved earlier by reserve/div
// when ctx is marked FallBackBeforeDeadline (peerContext: div 1). A call
// to a key's heir after its owner did not answer gets div 2: half of what
// the owner's call left, and still the other half for the local share.
func reserveContext(ctx context.Context, div time.Duration) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok || ctx.Value(fallBackKey{}) == nil {
		return ctx, func() {}
	}
	reserve := min(max(time.Until(dl)/10, minReserve), maxReserve)
	return context.WithDeadline(ctx, dl.Add(-reserve/div))
}

// endedAtOwner reports whether an owner's answer to an item says that the
// item's context ended there before it was decided (the owner applies
// nothing once its call's deadline has passed).
func endedAtOwner(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// groupByOwner splits jobs by owner, keeping their order within a group.
func groupByOwner(jobs []*job) [][]*job {
	if len(jobs) == 1 {
		return [][]*job{jobs}
	}
	var groups [][]*job
	idx := map[string]int{}
	for _, j := range jobs {
		g, ok := idx[j.owner.Name]
		if !ok {
			g = len(groups)
			idx[j.owner.Name] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], j)
	}
	return groups
}

// forwardGroup sends jobs that share an owner in one call.
func (l *Limiter) forwardGroup(ctx context.Context, v *view, hops int, jobs []*job, now int64) {
	owner := jobs[0].owner
	items := make([]Forwarded, len(jobs))
	answers := make([]Answer, len(jobs))
	for i, j := range jobs {
		items[i] = Forwarded{Hash: j.hash, Limit: j.limit, Cost: j.cost, UpTo: j.upTo, Credit: j.credit, Report: j.report, Inline: j.inline, Client: j.client}
	}
	pctx, cancel := peerContext(ctx)
	err := l.peers.Check(pctx, owner, hops, items, answers)
	cancel()
	l.metrics.forwarded.Add(float64(len(jobs)))
	if err == nil {
		var elsewhere, undecided []*job
		var undecidedErr error
		for i, j := range jobs {
			if errors.Is(answers[i].Err, ErrStateElsewhere) {
				elsewhere = append(elsewhere, j)
				continue
			}
			if endedAtOwner(answers[i].Err) && ctx.Err() == nil {
				// The call reached the owner after its deadline there:
				// the owner decided nothing, and this caller still
				// waits. The failure mode answers, as for an owner
				// that did not answer at all.
				undecided = append(undecided, j)
				undecidedErr = fmt.Errorf("%w: %s answered late: %w", ErrPeerUnavailable, owner.Name, answers[i].Err)
				continue
			}
			res := j.res
			res.Result, res.Err, res.Source, res.Owner = answers[i].Result, answers[i].Err, SourceOwner, owner.Name
			j.granted, j.grantID, j.issuer = answers[i].Granted, answers[i].GrantID, answers[i].Issuer
			if res.Err != nil {
				res.Allowed = false
			}
		}
		if len(elsewhere) > 0 {
			l.unreachableAll(ctx, v, hops, elsewhere, owner, ErrStateElsewhere, now)
		}
		if len(undecided) > 0 {
			l.unreachableAll(ctx, v, hops, undecided, owner, undecidedErr, now)
		}
		return
	}
	// The owner did not answer. If the call never left (ErrNotSent) and
	// the ring has moved on meanwhile (the owner left), decide again with
	// the new ring. A call that may have reached the owner (a deadline
	// that passed while it was slow) is never sent again, to it or to the
	// new owner, which would fetch the state with the check counted and
	// count it again: the failure mode answers it.
	//
	// A receiver ahead of this node's epoch that does not own the keys
	// redirected the call (nothing applied): once this node has applied
	// its epoch (redirected waits, bounded), the jobs are routed again on
	// the new ring as a second hop, which is decided where it lands.
	retryHops := hops
	if l.redirected(ctx, v, hops, err) != nil {
		retryHops = hops + 1
	}
	if nv := l.view.Load(); nv != v && errors.Is(err, ErrNotSent) {
		retry := make([]job, 0, len(jobs))
		var orig []*job
		for _, j := range jobs {
			if o, _ := l.route(nv, j.hash); o.Name != owner.Name {
				retry = append(retry, *j)
				orig = append(orig, j)
			} else {
				l.unreachableAll(ctx, nv, hops, []*job{j}, owner, err, now)
			}
		}
		if len(retry) > 0 {
			l.decide(ctx, nv, retryHops, false, retry, now)
			// What a grant request was given is the job's, not its
			// answer's: copy it back to the caller's job.
			for i, j := range orig {
				j.granted, j.grantID, j.issuer, j.maybeApplied = retry[i].granted, retry[i].grantID, retry[i].issuer, retry[i].maybeApplied
			}
		}
		return
	}
	l.unreachableAll(ctx, v, hops, jobs, owner, err, now)
}

// unreachable answers a job whose owner could not be reached. A node that
// was itself forwarded the job (hops > 0) decides it here: the sender
// already counted it as the owner. If this node is the key's first heir,
// it decides a check on its copy, as it does when acting for the owner,
// so that every node's checks of the key are counted in one place (the
// sender's ring has dropped the owner before this one has), and grants
// nothing: a grant decided on its store would count beside the acting
// admissions. Otherwise, and on a leaving node (see leavingForwards), the
// limit's failure mode answers (see fallback.go). Context errors are the caller's, not the owner's: they
// are reported as such.
func (l *Limiter) unreachable(ctx context.Context, v *view, hops int, j *job, owner ring.Member, err error, now int64) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		res := j.res
		res.Result = bucket.Result{Limit: j.limit.Capacity()}
		res.Source, res.Owner, res.Err = SourceOwner, owner.Name, ctxErr
		return
	}
	if hops > 0 && l.isHeir(v, j) {
		l.actOnCopy(v, j, now)
		j.res.Owner = owner.Name
		l.metrics.fellBack(j.mode)
		return
	}
	if hops > 0 && !l.outOfRing(v) && !((j.upTo || j.credit || j.report) && l.firstHeir(v, j.hash)) {
		l.applyLocal(ctx, v, j, now)
		return
	}
	if j.upTo || j.credit || j.report {
		j.maybeApplied = !errors.Is(err, ErrNotSent) && !errors.Is(err, ErrNotMember) // a refusal applied nothing
		// A client's grant request: grant nothing rather than spend a
		// local share; the client then checks the usual way. A credit
		// is lost: the tokens lapse as they would have.
		res := j.res
		res.Result = bucket.Result{Limit: j.limit.Capacity()}
		res.Source, res.Owner, res.Err = SourceFallback, owner.Name, err
		return
	}
	l.fallback(v, j, owner, err, now)
}
