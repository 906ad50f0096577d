package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
)

// A batcher coalesces concurrent calls to one peer into few RPCs, without
// adding latency when the peer is idle (no Nagle-style timer):
//
//   - A caller appends its call to the queue. If fewer than maxInflight
//     sender goroutines exist and none is about to take from the queue, it
//     starts one, which takes the call at once: a call to an idle peer goes
//     out immediately.
//   - Otherwise every sender is busy with an RPC and the call waits. A
//     sender that finishes its RPC takes everything queued, up to maxBatch
//     items, and sends it as its next RPC; so the batch size adapts to the
//     load (about arrival rate × RPC latency / maxInflight).
//   - With window > 0, a sender that finds fewer than maxBatch items waits
//     up to window for more before it sends.
//   - A sender exits when it finds the queue empty, so an idle peer has no
//     goroutine. Senders are counted in the client's WaitGroup.
//
// A caller's items are never split across RPCs unless they exceed maxBatch
// (the caller then queues several calls of at most maxBatch items each).
// Each call is answered exactly once, on its done channel, by whoever
// claims it: the sender after its RPC, or close. A caller whose ctx ends
// while its call is queued or in flight abandons it and returns at once;
// the sender then skips it (it is not sent if still queued).
type batcher[I, O any] struct {
	// ctx is the client's: cancelled by Close, it aborts RPCs in flight.
	ctx         context.Context
	wg          *sync.WaitGroup
	pool        *wire.Pool[I, O]
	maxBatch    int
	maxInflight int
	window      time.Duration
	timeout     time.Duration
	// flush sends one RPC for calls (n items in all, none abandoned when
	// taken) and answers each call it can claim.
	flush func(ctx context.Context, calls []*wire.Call[I, O], n int)

	mu       sync.Mutex
	queue    wire.Queue[I, O]
	senders  int // sender goroutines
	pending  int // senders that will take from the queue before their next RPC
	closed   bool
	closeErr error
	full     chan struct{} // wakes a sender waiting out the window
}

// get returns an unused call.
func (b *batcher[I, O]) get() *wire.Call[I, O] { return b.pool.Get() }

// do queues calls (one caller's, in order) and waits until each is
// answered or ctx ends. It returns the first error of a call, or ctx.Err()
// if ctx ended first. collect, if not nil, is called for each answered
// call (in order, whatever its error) before do recycles the calls.
func (b *batcher[I, O]) do(ctx context.Context, calls []*wire.Call[I, O], collect func(pc *wire.Call[I, O])) error {
	defer b.pool.Put(calls...)
	if err := ctx.Err(); err != nil {
		return err
	}
	dl, _ := ctx.Deadline()
	for _, pc := range calls {
		pc.Deadline = dl
	}
	if err := b.enqueue(calls); err != nil {
		return err
	}
	var first error
	if err := wire.Wait(ctx, calls, func(i int, err error) {
		if err != nil && first == nil {
			first = err
		}
		if collect != nil {
			collect(calls[i])
		}
	}); err != nil {
		return err
	}
	return first
}

// enqueue appends calls to the queue and makes sure a sender will take
// them.
func (b *batcher[I, O]) enqueue(calls []*wire.Call[I, O]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.closeErr
	}
	for _, pc := range calls {
		b.queue.Push(pc)
	}
	switch {
	case b.pending > 0:
		// A sender will take from the queue before its next RPC; if it is
		// waiting out the window and the batch is full, wake it.
		if b.queue.Items() >= b.maxBatch {
			select {
			case b.full <- struct{}{}:
			default:
			}
		}
	case b.senders < b.maxInflight:
		b.spawnLocked()
	}
	return nil
}

// spawnLocked starts a sender. b.mu is held and b is not closed.
func (b *batcher[I, O]) spawnLocked() {
	b.senders++
	b.pending++
	b.wg.Add(1)
	go b.run()
}

// run is a sender: it takes batches from the queue and sends them until
// the queue is empty.
func (b *batcher[I, O]) run() {
	defer b.wg.Done()
	var batch []*wire.Call[I, O]
	b.mu.Lock()
	for {
		// Here b.mu is held and this sender counts in b.pending.
		if b.window > 0 && !b.closed && b.queue.Len() > 0 && b.queue.Items() < b.maxBatch {
			b.mu.Unlock()
			t := time.NewTimer(b.window)
			select {
			case <-t.C:
			case <-b.full:
			case <-b.ctx.Done():
			}
			t.Stop()
			b.mu.Lock()
		}
		var n int
		batch, n = b.queue.Take(batch[:0], b.maxBatch)
		b.pending--
		if len(batch) == 0 {
			b.senders--
			b.mu.Unlock()
			return
		}
		if b.queue.Len() > 0 && !b.closed && b.pending == 0 && b.senders < b.maxInflight {
			b.spawnLocked() // more than one batch is queued
		}
		b.mu.Unlock()
		b.send(batch, n)
		clear(batch) // drop references to recycled calls
		b.mu.Lock()
		b.pending++
	}
}

// send makes one RPC for batch. Its deadline is the client's Timeout from
// now, or the latest deadline of the callers when every caller has an
// earlier one: the RPC is useful as long as any of them waits.
func (b *batcher[I, O]) send(batch []*wire.Call[I, O], n int) {
	dl := time.Now().Add(b.timeout)
	if latest := latestDeadline(batch); !latest.IsZero() && latest.Before(dl) {
		dl = latest
	}
	ctx, cancel := context.WithDeadline(b.ctx, dl)
	defer cancel()
	b.flush(ctx, batch, n)
}

// latestDeadline is the latest deadline of the callers of batch, or zero
// if one of them has none.
func latestDeadline[I, O any](batch []*wire.Call[I, O]) time.Time {
	var latest time.Time
	for _, pc := range batch {
		if pc.Deadline.IsZero() {
			return time.Time{}
		}
		if pc.Deadline.After(latest) {
			latest = pc.Deadline
		}
	}
	return latest
}

// callersDeadline reports whether ctx, the context send passed to flush
// with batch, ends at the callers' deadline rather than at the batcher's
// timeout: an RPC that hits it was cut short by its callers, not by a
// slow peer. It must be called before flush answers any call of batch.
func callersDeadline[I, O any](ctx context.Context, batch []*wire.Call[I, O]) bool {
	dl, ok := ctx.Deadline()
	latest := latestDeadline(batch)
	return ok && !latest.IsZero() && !latest.After(dl)
}

// close refuses new calls with err and answers the queued ones with it.
// Senders in flight finish (their RPCs end with the client's ctx or the
// conn) and then exit.
func (b *batcher[I, O]) close(err error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	if !errors.Is(err, limiter.ErrNotSent) {
		err = fmt.Errorf("%w: %w", limiter.ErrNotSent, err) // refused or still queued: not sent
	}
	b.closed, b.closeErr = true, err
	q := b.queue.Drain()
	b.mu.Unlock()
	select {
	case b.full <- struct{}{}: // wake a sender waiting out the window
	default:
	}
	wire.FailAll(q, err)
}
