package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// errRetry marks a failure after which a call's items were not applied, or
// may not have been (a stream broken mid-flight), and may be sent to
// another node.
var errRetry = errors.New("client: node unreachable")

// errClosed fails calls queued when the client closes.
var errClosed = errors.New("client: closed")

// A nodeStream coalesces the checks that concurrent callers send to one
// node into few messages on one long-lived CheckStream, without adding
// latency when the node is idle (no timer, no Nagle):
//
//   - A caller queues its call. If no goroutine is sending and fewer than
//     maxInflight messages await answers, the caller itself sends at once
//     everything queued (flat combining): a lone check goes out
//     immediately, in its own message.
//   - Otherwise the call waits in the queue. Whoever sends next (the
//     sender finishing, or the receiver when an answer frees a slot) takes
//     everything queued, up to maxBatch items, as one message; so messages
//     grow with the load, about arrival rate × round trip / maxInflight.
//   - The receiver goroutine (one per stream) matches answers to messages
//     by id and answers each call.
//
// A broken stream fails the calls in flight with errRetry, and the next
// send opens a new one. When the node says it is draining, the stream is
// closed for sending, its answers are still read, and the node counts as
// down for downFor, so callers route elsewhere.
type nodeStream struct {
	name, addr  string
	conn        *grpc.ClientConn
	api         sluicev1.RateLimiterClient
	ctx         context.Context // the client's, cancelled by Close
	wg          *sync.WaitGroup // receiver goroutines
	maxBatch    int
	maxInflight int
	stats       *streamStats
	kick        func() // asks the client for a membership refresh

	// downUntil (unix ns) is when a node that failed or drained may be
	// routed to again.
	downUntil atomic.Int64

	mu      sync.Mutex
	queue   wire.Queue[*sluicev1.CheckItem, Result]
	sending bool
	sess    *session
	closed  error                       // set by close: what enqueue fails with
	msg     sluicev1.CheckStreamRequest // the sender's, reused
}

// session is one CheckStream; its fields are guarded by nodeStream.mu.
type session struct {
	stream     sluicev1.RateLimiter_CheckStreamClient
	cancel     context.CancelFunc
	inflight   wire.Inflight[[]*call]
	draining   bool // the node asked us to stop sending
	sendClosed bool
	dead       bool
}

// streamStats counts what the streams did; the test and `sluice bench`
// read them through Client.Stats.
type streamStats struct {
	messages, items, queued, retries, misrouted, refreshes atomic.Int64
}

// call is one caller's items for one node: In are the items, and the
// claimer fills Out with their results.
type call = wire.Call[*sluicev1.CheckItem, Result]

var callPool wire.Pool[*sluicev1.CheckItem, Result]

func newNodeStream(c *Client, name, addr string, conn *grpc.ClientConn) *nodeStream {
	return &nodeStream{
		name: name, addr: addr, conn: conn, api: sluicev1.NewRateLimiterClient(conn),
		ctx: c.ctx, wg: &c.wg, maxBatch: c.maxBatch, maxInflight: c.maxInflight,
		stats: &c.stats, kick: c.kick,
	}
}

// isDown reports whether the node was found unreachable or draining
// lately; now is in unix ns.
func (ns *nodeStream) isDown(now int64) bool { return now < ns.downUntil.Load() }

// markDown routes around the node for downFor.
func (ns *nodeStream) markDown() { ns.downUntil.Store(time.Now().Add(downFor).UnixNano()) }

// downFor is how long a node that failed or drained is routed around.
const downFor = time.Second

// enqueue queues pc and, if nobody is sending and a slot is free, sends.
func (ns *nodeStream) enqueue(pc *call) {
	ns.mu.Lock()
	if ns.closed != nil {
		err := ns.closed
		ns.mu.Unlock()
		pc.Fail(err)
		return
	}
	ns.queue.Push(pc)
	if ns.sending || (ns.sess != nil && !ns.sess.dead && !ns.sess.draining && ns.sess.inflight.Len() >= ns.maxInflight) {
		ns.stats.queued.Add(1)
		ns.mu.Unlock()
		return
	}
	ns.sending = true
	ns.sendLoop()
}

// sendLoop sends what is queued while slots are free. It is called with
// mu held and sending set, and returns with mu released and sending clear.
func (ns *nodeStream) sendLoop() {
	for ns.closed == nil {
		sess := ns.sess
		if sess != nil && sess.draining && !sess.sendClosed && sess.stream != nil {
			sess.sendClosed = true
			st := sess.stream
			ns.mu.Unlock()
			_ = st.CloseSend()
			ns.mu.Lock()
			continue
		}
		if ns.queue.Len() == 0 {
			break
		}
		if sess == nil || sess.dead || sess.draining {
			if ns.isDown(time.Now().UnixNano()) {
				ns.failQueue(fmt.Errorf("%w: %s is draining or down", errRetry, ns.name))
				break
			}
			ns.mu.Unlock()
			s, err := ns.open()
			ns.mu.Lock()
			if err != nil {
				ns.markDown()
				ns.failQueue(fmt.Errorf("%w: %s: %v", errRetry, ns.name, err))
				break
			}
			ns.sess = s
			ns.wg.Add(1)
			go ns.receive(s)
			continue
		}
		if sess.inflight.Len() >= ns.maxInflight {
			break
		}
		// The batch stays in sess.inflight until answered: a new slice.
		batch, n := ns.queue.Take(make([]*call, 0, min(ns.queue.Len(), 64)), ns.maxBatch)
		if len(batch) == 0 {
			continue
		}
		id := sess.inflight.Add(batch)
		msg := &ns.msg
		msg.Id = id
		msg.Items = msg.Items[:0]
		for _, pc := range batch {
			msg.Items = append(msg.Items, pc.In...)
		}
		st := sess.stream
		ns.mu.Unlock()
		err := st.Send(msg) // encodes msg before it returns
		clear(msg.Items)
		ns.stats.messages.Add(1)
		ns.stats.items.Add(int64(n))
		ns.mu.Lock()
		if err != nil {
			// The receiver sees the stream's end too and fails what is
			// in flight, this batch included, unless it already left.
			sess.dead = true
			if sess.stream == nil {
				if b, ok := sess.inflight.Remove(id); ok {
					wire.FailAll(b, fmt.Errorf("%w: %v", errRetry, err))
				}
			}
		}
	}
	ns.sending = false
	ns.mu.Unlock()
}

// failQueue fails every queued call. mu is held.
func (ns *nodeStream) failQueue(err error) { wire.FailAll(ns.queue.Drain(), err) }

// open starts a CheckStream.
func (ns *nodeStream) open() (*session, error) {
	ctx, cancel := context.WithCancel(ns.ctx)
	st, err := ns.api.CheckStream(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return &session{stream: st, cancel: cancel}, nil
}

// receive reads answers of sess until it ends.
func (ns *nodeStream) receive(sess *session) {
	defer ns.wg.Done()
	defer sess.cancel()
	for {
		resp := sluicev1.CheckStreamResponseFromVTPool()
		if err := sess.stream.RecvMsg(resp); err != nil {
			resp.ReturnToVTPool()
			ns.broken(sess, err)
			return
		}
		if resp.GetDrain() {
			resp.ReturnToVTPool()
			ns.markDown()
			ns.kick()
			ns.mu.Lock()
			sess.draining = true
			if ns.sending {
				ns.mu.Unlock() // the sender closes the stream's side
			} else {
				ns.sending = true
				ns.sendLoop() // closes the stream's side, sends the queue elsewhere
			}
			continue
		}
		ns.mu.Lock()
		batch, ok := sess.inflight.Remove(resp.GetId())
		ns.mu.Unlock()
		if ok {
			ns.deliver(batch, resp.GetResults())
		}
		resp.ReturnToVTPool()
		ns.resume()
	}
}

// resume lets the receiver send what waits for a free slot.
func (ns *nodeStream) resume() {
	ns.mu.Lock()
	if ns.sending || ns.queue.Len() == 0 {
		ns.mu.Unlock()
		return
	}
	ns.sending = true
	ns.sendLoop()
}

// broken fails what sess has in flight after its stream ended with err.
func (ns *nodeStream) broken(sess *session, err error) {
	ns.mu.Lock()
	sess.dead = true
	inflight := sess.inflight.Drain()
	sess.stream = nil
	if ns.sess == sess {
		ns.sess = nil
	}
	if !sess.draining && ns.ctx.Err() == nil && ns.closed == nil {
		// Not a clean goodbye: route around the node for a while.
		ns.markDown()
	}
	ns.mu.Unlock()
	rerr := fmt.Errorf("%w: %s: %v", errRetry, ns.name, err)
	for _, b := range inflight {
		wire.FailAll(b, rerr)
	}
	if ns.ctx.Err() == nil {
		ns.kick()
		ns.resume()
	}
}

// deliver answers each call of a batch from the message's results.
func (ns *nodeStream) deliver(batch []*call, results []*sluicev1.CheckResult) {
	off := 0
	for _, pc := range batch {
		n := len(pc.In)
		if off+n > len(results) {
			pc.Fail(status.Errorf(codes.Internal, "client: %s answered %d results for %d items", ns.name, len(results), off+n))
			off += n
			continue
		}
		if pc.Claim() {
			for j := 0; j < n; j++ {
				pc.Out[j] = fromProtoResult(results[off+j])
				if ns.name != "" && pc.Out[j].Owner != "" && pc.Out[j].Owner != ns.name &&
					pc.Out[j].Source == "owner" {
					ns.stats.misrouted.Add(1)
					ns.kick()
				}
			}
			pc.Answer(nil)
		}
		off += n
	}
}

// close fails what is queued, and later calls, with err, and ends the
// stream at once; the receiver fails what is in flight and exits.
func (ns *nodeStream) close(err error) {
	ns.mu.Lock()
	ns.closed = err
	ns.failQueue(err)
	sess := ns.sess
	ns.mu.Unlock()
	if sess != nil {
		sess.cancel()
	}
}

// retireIfIdle closes the stream of a node that left the ring if nothing
// is queued or in flight on it, and reports whether it did. A caller that
// still routes to it from an older table gets errRetry and goes elsewhere.
func (ns *nodeStream) retireIfIdle() bool {
	ns.mu.Lock()
	if ns.sending || ns.queue.Len() > 0 || (ns.sess != nil && ns.sess.inflight.Len() > 0) {
		ns.mu.Unlock()
		return false
	}
	ns.mu.Unlock()
	ns.close(fmt.Errorf("%w: %s left the ring", errRetry, ns.name))
	return true
}
