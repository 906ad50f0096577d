package bench

import (
	"context"
	"time"
)

// callCtx hands out the per-call deadline context, renewed every
// timeout/10 rather than made per call: a call started before renewAt has
// between timeout and 1.1×timeout.
type callCtx struct {
	parent  context.Context
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	renewAt time.Time
}

func (c *callCtx) get(now time.Time) context.Context {
	if c.ctx == nil || !now.Before(c.renewAt) {
		c.release()
		slack := c.timeout / 10
		c.ctx, c.cancel = context.WithDeadline(c.parent, now.Add(c.timeout+slack))
		c.renewAt = now.Add(slack)
	}
	return c.ctx
}

// expire makes the next get make a new context (after a call that failed
// on this one's deadline).
func (c *callCtx) expire() { c.renewAt = time.Time{} }

func (c *callCtx) release() {
	if c.cancel != nil {
		c.cancel()
		c.ctx, c.cancel = nil, nil
	}
}
