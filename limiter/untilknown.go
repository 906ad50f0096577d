package limiter

import (
	"context"
	"errors"
	"time"
)

// A node that has just joined refuses the peer calls of nodes its ring
// does not have yet (ErrNotMember) until gossip has told it of them,
// usually within a few hundred milliseconds of its start, while those
// nodes already route keys to it. Such a refusal applied nothing, so the
// call may be sent again; answering it otherwise loses something: a
// check answered from its failure mode counts beside the key's state
// (which the joiner may hold already), and a pass-on refused leaves
// states where the owner will not look for them.

// untilKnown takes err, the error of a first call, and while it says that
// the peer refused this node as a non-member, calls call again, waiting
// first, then twice as long each time, up to most, between tries, until
// the next try would start more than budget from the first refusal, or
// ctx ends. It returns the last call's error. A first call that was not
// refused costs nothing more (the per-check path).
func untilKnown(ctx context.Context, err error, budget, first, most time.Duration, call func() error) error {
	if err == nil || !errors.Is(err, ErrNotMember) {
		return err
	}
	giveUp := time.Now().Add(budget)
	for wait := first; !time.Now().Add(wait).After(giveUp); wait = min(2*wait, most) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		if err = call(); err == nil || !errors.Is(err, ErrNotMember) {
			return err
		}
	}
	return err
}

// Retrying a check that its owner refused as from a non-member: the first
// wait and the longest between tries.
const (
	checkRetryMin = 5 * time.Millisecond
	checkRetryMax = 50 * time.Millisecond
)

// DefaultRefusedRetry is Config.RefusedRetry's default: the most time the
// retries of a check refused as from a non-member may take (the failure
// mode answers after it if the owner still refuses).
const DefaultRefusedRetry = 400 * time.Millisecond

// knownWait is how long a check refused as from a non-member may be asked
// again under ctx: RefusedRetry, at most half of what is left of ctx's
// deadline.
func (l *Limiter) knownWait(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return min(l.refusedRetry, time.Until(dl)/2)
	}
	return l.refusedRetry
}
