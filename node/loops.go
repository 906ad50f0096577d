package node

import (
	"context"
	"log/slog"
	"time"
)

// handoffLoop pushes states this node no longer owns after each ring change.
// A handoff that some owner refused (it has not seen this node join yet,
// or did not answer) is tried again after a growing wait, from
// handoffRetryMin to handoffRetryMax, until it completes or the ring
// changes: the states it kept are no owner's pending partition, so
// nobody would fetch them.
func (n *Node) handoffLoop(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.handoff:
			wait = 0
		case <-retry.C:
		}
		_, err := n.limiter.HandOff(ctx)
		if err == nil || ctx.Err() != nil {
			continue
		}
		wait = min(max(2*wait, handoffRetryMin), handoffRetryMax)
		// A handoff that fails while the rings settle (a rejoin) is
		// expected: INFO. One still failing at the longest wait, some
		// seconds on, is WARN.
		level := slog.LevelInfo
		if wait == handoffRetryMax {
			level = slog.LevelWarn
		}
		n.log.Log(ctx, level, "handoff incomplete; trying again", "err", err, "in", wait)
		retry.Reset(wait)
	}
}

// The bounds of the wait before a handoff is tried again.
const (
	handoffRetryMin = 250 * time.Millisecond
	handoffRetryMax = 5 * time.Second
)

// every calls fn each interval d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// sweepLoop drops expired states periodically, and reports fallback
// admissions to their owners each second.
func (n *Node) sweepLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.SweepInterval)
	defer t.Stop()
	reconcile := time.NewTicker(time.Second)
	defer reconcile.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-reconcile.C:
			// Report fallback admissions to owners that are back.
			if n.limiter.PendingReports() > 0 {
				n.limiter.Reconcile(ctx)
			}
		case <-t.C:
			if dropped := n.limiter.Sweep(); dropped > 0 {
				n.log.Debug("swept expired keys", "dropped", dropped)
			}
		}
	}
}
