package transport

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
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
	pool        *sync.Pool // of *pendingCall[I, O]
	maxBatch    int
	maxInflight int
	window      time.Duration
	timeout     time.Duration
	// flush sends one RPC for calls (n items in all, none abandoned when
	// taken) and answers each call it can claim.
	flush func(ctx context.Context, calls []*pendingCall[I, O], n int)

	mu       sync.Mutex
	queue    []*pendingCall[I, O]
	queued   int // items in queue
	senders  int // sender goroutines
	pending  int // senders that will take from the queue before their next RPC
	closed   bool
	closeErr error
	full     chan struct{} // wakes a sender waiting out the window
}

// The states of a pendingCall.
const (
	callQueued    uint32 = iota // queued or in flight
	callClaimed                 // being answered; done will be sent
	callAbandoned               // the caller left; never answered
)

// pendingCall is one caller's items waiting for an RPC. in and out are the
// caller's: only the sender that claims the call writes out.
type pendingCall[I, O any] struct {
	in       []I
	out      []O
	deadline time.Time // the caller's, zero if none
	state    atomic.Uint32
	done     chan error // buffered; one send per use
}

// claim reports whether the caller still waits for the call; the claimer
// then fills out and must send on done exactly once.
func (pc *pendingCall[I, O]) claim() bool {
	return pc.state.CompareAndSwap(callQueued, callClaimed)
}

// fail answers pc with err if its caller still waits. pc must not be
// touched afterwards: its caller may reuse it.
func (pc *pendingCall[I, O]) fail(err error) {
	if pc.claim() {
		pc.done <- err
	}
}

func newPendingPool[I, O any]() *sync.Pool {
	return &sync.Pool{New: func() any { return &pendingCall[I, O]{done: make(chan error, 1)} }}
}

// get returns an unused call.
func (b *batcher[I, O]) get() *pendingCall[I, O] {
	pc := b.pool.Get().(*pendingCall[I, O])
	pc.state.Store(callQueued)
	return pc
}

// do queues calls (one caller's, in order) and waits until each is
// answered or ctx ends. It returns the first error of a call, or ctx.Err()
// if ctx ended first. collect, if not nil, is called for each answered
// call (in order, whatever its error) before do recycles the calls.
func (b *batcher[I, O]) do(ctx context.Context, calls []*pendingCall[I, O], collect func(pc *pendingCall[I, O])) error {
	if err := ctx.Err(); err != nil {
		b.recycle(calls)
		return err
	}
	dl, _ := ctx.Deadline()
	for _, pc := range calls {
		pc.deadline = dl
	}
	if err := b.enqueue(calls); err != nil {
		b.recycle(calls)
		return err
	}
	var first error
	for i, pc := range calls {
		select {
		case err := <-pc.done:
			if err != nil && first == nil {
				first = err
			}
			if collect != nil {
				collect(pc)
			}
		case <-ctx.Done():
			// Abandon what is left. A call claimed meanwhile is being
			// answered right now: wait for it so it can be recycled.
			for _, q := range calls[i:] {
				if !q.state.CompareAndSwap(callQueued, callAbandoned) {
					<-q.done
				}
			}
			b.recycle(calls)
			return ctx.Err()
		}
	}
	b.recycle(calls)
	return first
}

// recycle returns the calls that nobody else references to the pool. An
// abandoned call may still sit in a queue or batch: it is left to the GC.
func (b *batcher[I, O]) recycle(calls []*pendingCall[I, O]) {
	for _, pc := range calls {
		if pc.state.Load() == callAbandoned {
			continue
		}
		pc.in, pc.out, pc.deadline = nil, nil, time.Time{}
		b.pool.Put(pc)
	}
}

// enqueue appends calls to the queue and makes sure a sender will take
// them.
func (b *batcher[I, O]) enqueue(calls []*pendingCall[I, O]) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return b.closeErr
	}
	for _, pc := range calls {
		b.queue = append(b.queue, pc)
		b.queued += len(pc.in)
	}
	switch {
	case b.pending > 0:
		// A sender will take from the queue before its next RPC; if it is
		// waiting out the window and the batch is full, wake it.
		if b.queued >= b.maxBatch {
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
	var batch []*pendingCall[I, O]
	b.mu.Lock()
	for {
		// Here b.mu is held and this sender counts in b.pending.
		if b.window > 0 && !b.closed && len(b.queue) > 0 && b.queued < b.maxBatch {
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
		batch, n = b.takeLocked(batch[:0])
		b.pending--
		if len(batch) == 0 {
			b.senders--
			b.mu.Unlock()
			return
		}
		if len(b.queue) > 0 && !b.closed && b.pending == 0 && b.senders < b.maxInflight {
			b.spawnLocked() // more than one batch is queued
		}
		b.mu.Unlock()
		b.send(batch, n)
		clear(batch) // drop references to recycled calls
		b.mu.Lock()
		b.pending++
	}
}

// takeLocked moves calls from the head of the queue to batch, up to
// maxBatch items (at least one call), dropping abandoned ones, and returns
// the batch and its item count.
func (b *batcher[I, O]) takeLocked(batch []*pendingCall[I, O]) ([]*pendingCall[I, O], int) {
	n, k := 0, 0
	for ; k < len(b.queue); k++ {
		pc := b.queue[k]
		if pc.state.Load() == callAbandoned {
			b.queued -= len(pc.in)
			continue
		}
		if len(batch) > 0 && n+len(pc.in) > b.maxBatch {
			break
		}
		batch = append(batch, pc)
		n += len(pc.in)
		b.queued -= len(pc.in)
	}
	rest := copy(b.queue, b.queue[k:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return batch, n
}

// send makes one RPC for batch. Its deadline is the client's Timeout from
// now, or the latest deadline of the callers when every caller has an
// earlier one: the RPC is useful as long as any of them waits.
func (b *batcher[I, O]) send(batch []*pendingCall[I, O], n int) {
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
func latestDeadline[I, O any](batch []*pendingCall[I, O]) time.Time {
	var latest time.Time
	for _, pc := range batch {
		if pc.deadline.IsZero() {
			return time.Time{}
		}
		if pc.deadline.After(latest) {
			latest = pc.deadline
		}
	}
	return latest
}

// callersDeadline reports whether ctx, the context send passed to flush
// with batch, ends at the callers' deadline rather than at the batcher's
// timeout: an RPC that hits it was cut short by its callers, not by a
// slow peer. It must be called before flush answers any call of batch.
func callersDeadline[I, O any](ctx context.Context, batch []*pendingCall[I, O]) bool {
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
	b.closed, b.closeErr = true, err
	q := b.queue
	b.queue, b.queued = nil, 0
	b.mu.Unlock()
	select {
	case b.full <- struct{}{}: // wake a sender waiting out the window
	default:
	}
	for _, pc := range q {
		pc.fail(err)
	}
}
