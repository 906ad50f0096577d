package wire

import (
	"context"
	"errors"
	"io"
	"sync"
)

// Batches is what ServeBatches needs besides the stream.
type Batches[Req, Resp any] struct {
	// Drain, when it ends (nil: never), makes ServeBatches send DrainMsg,
	// which asks the client to close its side.
	Drain    context.Context
	DrainMsg Resp
	// Handle decides one message.
	Handle func(Req) Resp
	// Fail answers a message whose Handle panicked, with err (from
	// Recovery.Recover).
	Fail func(Req, error) Resp
	// Method names the stream in Recovery's log line and count.
	Method string
	// Recovery logs and counts a panic of Handle; nil logs to
	// slog.Default().
	Recovery *Recovery
	// MaxInflight bounds the messages decided at once; 0 means
	// MaxStreamInflight.
	MaxInflight int
	// Gate admits each message (the budgets of the stream's connection and
	// listener, memory shedding) and runs it on the listener's pool; a
	// message it refuses is answered at once by Fail with its
	// RESOURCE_EXHAUSTED error. nil admits all, each on a goroutine of its
	// own.
	Gate *Gate
}

// ServeBatches is the server side of a stream of batches (CheckStream and
// Peer.CheckStream): each message is handled on a worker of its own (b.Gate), so
// a batch that waits on another node (a key mid-handoff, an owner not
// answering) does not hold up the batches behind it, and answers go out as
// they are ready, under a lock (a stream's Send is not safe for concurrent
// use). At most b.MaxInflight messages are decided at once: with that many
// unanswered, ServeBatches reads nothing more until one is answered, so a
// client that sends without reading the replies is held back by flow
// control rather than costing a goroutine per message. Past the budget of
// its connection, or of the node (b.Gate), a message is answered
// RESOURCE_EXHAUSTED at once: one client's excess is refused, not queued
// in front of the others'. A panic in Handle
// is recovered in its goroutine (b.Recovery) and the message answered by
// b.Fail. When b.Drain ends, b.DrainMsg asks the client to close its side;
// ServeBatches returns once the client has closed it and every batch has
// been answered.
func ServeBatches[Req, Resp any](recv func() (Req, error), send func(Resp) error, b Batches[Req, Resp]) error {
	st := &batchStream[Req, Resp]{send: send, b: b}
	defer st.wg.Wait()
	if b.Drain != nil {
		stop := context.AfterFunc(b.Drain, func() { st.sendOne(b.DrainMsg) })
		defer stop()
	}
	n := b.MaxInflight
	if n <= 0 {
		n = MaxStreamInflight
	}
	st.slots = make(chan struct{}, n)
	for {
		st.slots <- struct{}{} // a free slot before reading the next message
		req, err := recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := b.Gate.Enter(); err != nil {
			st.sendOne(b.Fail(req, err))
			<-st.slots
			continue
		}
		st.wg.Add(1)
		t, _ := st.tasks.Get().(*batchTask[Req, Resp])
		if t == nil {
			t = &batchTask[Req, Resp]{st: st}
		}
		t.req = req
		b.Gate.goTask(t)
	}
}

// batchStream is the state of one ServeBatches.
type batchStream[Req, Resp any] struct {
	send    func(Resp) error
	b       Batches[Req, Resp]
	slots   chan struct{} // a token per message being decided
	wg      sync.WaitGroup
	tasks   sync.Pool // of *batchTask: a message handed to the pool allocates nothing
	sendMu  sync.Mutex
	sendErr error
}

// sendOne sends m unless a send failed before (a stream's Send is not
// safe for concurrent use).
func (st *batchStream[Req, Resp]) sendOne(m Resp) {
	st.sendMu.Lock()
	if st.sendErr == nil {
		st.sendErr = st.send(m)
	}
	st.sendMu.Unlock()
}

// handle decides req; a panic is recovered and answered by b.Fail.
func (st *batchStream[Req, Resp]) handle(req Req) (resp Resp) {
	defer func() {
		if v := recover(); v != nil {
			resp = st.b.Fail(req, st.b.Recovery.Recover(st.b.Method, v))
		}
	}()
	return st.b.Handle(req)
}

// batchTask is one message on its way to a worker, pooled per stream.
type batchTask[Req, Resp any] struct {
	st  *batchStream[Req, Resp]
	req Req
}

func (t *batchTask[Req, Resp]) run() {
	st, req := t.st, t.req
	var zero Req
	t.req = zero
	st.tasks.Put(t)
	defer st.wg.Done()
	defer func() { <-st.slots }()
	st.sendOne(st.handle(req))
	st.b.Gate.Leave()
}
