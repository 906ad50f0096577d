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

// untilKnown calls call until it is not refused as from a non-member, or
// until the next try would start more than budget from now, or ctx ends,
// waiting first, then twice as long each time, up to most, between tries.
// It returns the last call's error.
func untilKnown(ctx context.Context, budget, first, most time.Duration, call func() error) error {
	giveUp := time.Now().Add(budget)
	wait := first
	for {
		err := call()
		if err == nil || !errors.Is(err, ErrNotMember) || time.Now().Add(wait).After(giveUp) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, most)
	}
}

// Retrying a check that its owner refused as from a non-member: the first
// wait, the longest, and the most time the retries may take, at most half
// of what is left of the call's deadline (the failure mode answers in the
// rest if the owner still refuses).
const (
	checkRetryMin  = 5 * time.Millisecond
	checkRetryMax  = 50 * time.Millisecond
	checkRetryMost = 400 * time.Millisecond
)

// knownWait is how long a check refused as from a non-member may be asked
// again under ctx.
func knownWait(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return min(checkRetryMost, time.Until(dl)/2)
	}
	return checkRetryMost
}
