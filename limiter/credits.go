package limiter

import (
	"context"
	"sync"
	"time"
)

// Background credits. The issuer of a grant redeems a return at once; the
// credit it then owes the key's owner may wait for this node's HandOff
// and for the owner to know this node (a gossip round or more on a busy
// cluster): longer than a peer call may last. So the credit runs in a
// goroutine of its own, bounded by returnTimeout, and the issuer answers
// the holder when it is applied or after a fetch timeout, whichever comes
// first: usually with the tokens back already, always in time.
// WaitCredits waits for the credits, Close ends them. A credit that fails
// leaves its tokens to lapse, as a return that fails does.

// credits owns the background credits of a Limiter.
type credits struct {
	ctx    context.Context // ended by close
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed and wg.Add against close
	closed bool
	wg     sync.WaitGroup
}

func newCredits() *credits {
	ctx, cancel := context.WithCancel(context.Background())
	return &credits{ctx: ctx, cancel: cancel}
}

// creditLater applies credit jobs (redeemed already) in the background,
// on copies of jobs, and waits for them for up to a fetch timeout (or
// until ctx ends). After Close it applies nothing.
func (l *Limiter) creditLater(ctx context.Context, jobs []job) {
	own := make([]job, len(jobs))
	results := make([]Result, len(jobs))
	for i := range jobs {
		own[i] = jobs[i]
		own[i].res = &results[i]
	}
	c := l.credits
	done := make(chan struct{})
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.wg.Go(func() {
		defer close(done)
		cctx, cancel := context.WithTimeout(c.ctx, l.returnTimeout())
		defer cancel()
		l.credit(cctx, own)
		for i := range own {
			if err := results[i].Err; err != nil {
				l.log.Debug("grant credit failed: its tokens lapse", "tokens", own[i].cost, "err", err)
			}
		}
	})
	c.mu.Unlock()
	t := time.NewTimer(l.fetchTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// WaitCredits waits until the credits of the grant returns this node has
// taken are applied (or have failed), or ctx ends. A node leaving calls
// it before Close.
func (l *Limiter) WaitCredits(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		l.credits.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// close ends the background credits and waits for them.
func (c *credits) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}
