package wire

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The states of a Call.
const (
	queued    uint32 = iota // queued or in flight: its caller waits
	claimed                 // being answered: done will be sent
	abandoned               // its caller left: never answered
)

// A Call is one caller's items waiting for an answer over the network.
// In and Out are the caller's: the caller sets In (and Out, if the answer
// fills a slice it owns) before it queues the call, and only the claimer
// writes Out. Deadline is the caller's, zero if none; a sender may use it
// to bound the request that carries the call.
//
// A call is answered exactly once: whoever answers it (a sender, a
// receiver, a closing engine) first wins Claim, then fills Out and calls
// Answer. A caller whose context ends abandons the call (see Wait); an
// abandoned call is never answered, and whoever still holds it skips it.
type Call[I, O any] struct {
	In       []I
	Out      []O
	Deadline time.Time
	state    atomic.Uint32
	done     chan error // buffered: one send per use
}

func newCall[I, O any]() *Call[I, O] { return &Call[I, O]{done: make(chan error, 1)} }

// Claim reports whether the caller still waits for c; the claimer then
// fills Out and must call Answer exactly once.
func (c *Call[I, O]) Claim() bool { return c.state.CompareAndSwap(queued, claimed) }

// Answer gives the claimed call c its outcome. c must not be touched
// afterwards: its caller may reuse it.
func (c *Call[I, O]) Answer(err error) { c.done <- err }

// Fail answers c with err if its caller still waits. c must not be touched
// afterwards.
func (c *Call[I, O]) Fail(err error) {
	if c.Claim() {
		c.done <- err
	}
}

// Abandoned reports whether c's caller left: c is not to be sent or
// answered.
func (c *Call[I, O]) Abandoned() bool { return c.state.Load() == abandoned }

// abandon is the caller leaving c. If c was claimed meanwhile, it is being
// answered right now: abandon waits for that answer, so that c can be
// reused, and reports false.
func (c *Call[I, O]) abandon() bool {
	if c.state.CompareAndSwap(queued, abandoned) {
		return true
	}
	<-c.done
	return false
}

// Wait waits for the answers of calls (one caller's), in order, and passes
// each to each, if not nil, with the call's index, as it arrives. If ctx
// ends first, Wait abandons the calls not answered yet and returns
// ctx.Err(); each is not called for them.
func Wait[I, O any](ctx context.Context, calls []*Call[I, O], each func(i int, err error)) error {
	for i, c := range calls {
		select {
		case err := <-c.done:
			if each != nil {
				each(i, err)
			}
		case <-ctx.Done():
			for _, c := range calls[i:] {
				c.abandon()
			}
			return ctx.Err()
		}
	}
	return nil
}

// FailAll answers with err each of calls whose caller still waits.
func FailAll[I, O any](calls []*Call[I, O], err error) {
	for _, c := range calls {
		c.Fail(err)
	}
}

// Live filters out, in place, the calls whose callers left, and counts
// the items (In) of the others.
func Live[I, O any](calls []*Call[I, O]) ([]*Call[I, O], int) {
	live, n := calls[:0], 0
	for _, c := range calls {
		if !c.Abandoned() {
			live = append(live, c)
			n += len(c.In)
		}
	}
	return live, n
}

// A Pool recycles calls, so that the hot path allocates none. The zero
// Pool is ready to use.
type Pool[I, O any] struct{ p sync.Pool }

// Get returns an unused call, waiting to be queued.
func (p *Pool[I, O]) Get() *Call[I, O] {
	c, _ := p.p.Get().(*Call[I, O])
	if c == nil {
		c = newCall[I, O]()
	}
	c.state.Store(queued)
	return c
}

// Put returns answered calls to the pool, once their caller is done with
// them. An abandoned call is left to the GC: a queue, a batch or a table
// may still hold it.
func (p *Pool[I, O]) Put(calls ...*Call[I, O]) {
	for _, c := range calls {
		if c.Abandoned() {
			continue
		}
		c.In, c.Out, c.Deadline = nil, nil, time.Time{}
		p.p.Put(c)
	}
}
