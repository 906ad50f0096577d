package node

import (
	"context"
	"time"
)

// replicateLoop sends the states changed since the last round to their
// heirs, and to the data directory's writer (persist.go), every
// ReplicationInterval.
//
// A key that has just spent its last token (limiter.Urgent) brings the
// next round forward, to at least a tenth of the interval after the last
// one: the copies of keys at their limit reach the heirs within
// milliseconds, and rounds stay at most ten times as frequent.
func (n *Node) replicateLoop(ctx context.Context) {
	d := n.cfg.ReplicationInterval
	t := time.NewTicker(d)
	defer t.Stop()
	urgent := n.limiter.Urgent()
	last := time.Now()
	round := func() {
		n.replicateRound(ctx)
		last = time.Now()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			round()
		case <-urgent:
			if wait := time.Until(last.Add(d / 10)); wait > 0 {
				w := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					w.Stop()
					return
				case <-w.C:
				}
			}
			round()
		}
	}
}

// replicateRound runs one round: the states changed since the last go to
// their heirs and the data directory's writer, which then knows that every
// change made before the round began is in its hands.
func (n *Node) replicateRound(ctx context.Context) {
	n.replMu.Lock()
	defer n.replMu.Unlock()
	began := time.Now()
	n.limiter.Replicate(ctx)
	if n.disk.w != nil {
		n.disk.w.MarkRound(began)
	}
}
