package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// errNoCheckStream fails the calls on a stream to a peer that predates
// Peer.CheckStream; they were not applied, and go again as unary calls.
var errNoCheckStream = errors.New("transport: peer has no CheckStream")

// checkMux carries one peer's Check calls on one Peer.CheckStream, which
// spares each call the cost of a unary RPC (its HTTP/2 headers, a stream,
// a goroutine on the server). Each call is a message with an id, answered
// under it; the batcher above still decides what goes in a call. A stream
// that breaks fails its calls in flight (as a broken connection fails
// unary calls), and the next call opens a new one. When the peer drains,
// the stream is closed for sending and its answers still read. A peer that
// answers UNIMPLEMENTED (an older node) gets unary calls from then on.
type checkMux struct {
	p    *peerConn
	pool wire.Pool[*sluicev1.PeerItem, *sluicev1.PeerResult]

	mu    sync.Mutex
	st    *muxStream // nil until opened, or after it broke or drained
	unary bool       // the peer has no CheckStream
}

// A muxCall is one Check call on a stream: In is its request's items, and
// the receiver sets Out to the results of the answer.
type muxCall = wire.Call[*sluicev1.PeerItem, *sluicev1.PeerResult]

// muxStream is one CheckStream; inflight and done are guarded by
// checkMux.mu.
type muxStream struct {
	stream   sluicev1.Peer_CheckStreamClient
	cancel   context.CancelFunc
	sendMu   sync.Mutex // a stream's Send and CloseSend are not concurrent-safe
	inflight wire.Inflight[*muxCall]
	done     bool // broken or draining: no new calls
}

// call makes one Check call, on the stream if the peer has one, and
// returns the results of its answer.
func (m *checkMux) call(ctx context.Context, req *sluicev1.PeerCheckRequest) ([]*sluicev1.PeerResult, error) {
	m.mu.Lock()
	if m.unary {
		m.mu.Unlock()
		return m.unaryCall(ctx, req)
	}
	s := m.st
	if s == nil || s.done {
		// Wait for the connection under the caller's deadline, not under
		// the lock: a new stream lives as long as the client, so opening
		// it must not block on a peer that does not answer.
		m.mu.Unlock()
		if err := m.ready(ctx); err != nil {
			return nil, notSent(err)
		}
		m.mu.Lock()
		if m.unary {
			m.mu.Unlock()
			return m.unaryCall(ctx, req)
		}
		if s = m.st; s == nil || s.done {
			var err error
			if s, err = m.open(); err != nil {
				m.mu.Unlock()
				return nil, notSent(err)
			}
			m.st = s
		}
	}
	c := m.pool.Get()
	c.In = req.Items
	id := s.inflight.Add(c)
	m.mu.Unlock()

	s.sendMu.Lock()
	// A failed Send means the stream has ended: its receiver learns why
	// from Recv and answers c.
	_ = s.stream.Send(&sluicev1.PeerCheckStreamRequest{Id: id, Request: req})
	s.sendMu.Unlock()
	one := [1]*muxCall{c}
	var err error
	if werr := wire.Wait(ctx, one[:], func(_ int, e error) { err = e }); werr != nil {
		m.mu.Lock()
		s.inflight.Remove(id) // a late answer finds nothing
		m.mu.Unlock()
		m.pool.Put(c) // not if abandoned: the receiver may still hold it
		return nil, status.FromContextError(werr).Err()
	}
	results := c.Out
	m.pool.Put(c)
	if errors.Is(err, errNoCheckStream) {
		return m.unaryCall(ctx, req)
	}
	return results, err
}

// notSent marks err, which ended a call before its request was sent, as
// limiter.ErrNotSent; status.Code still reads err's code.
func notSent(err error) error { return fmt.Errorf("%w: %w", limiter.ErrNotSent, err) }

// unaryCall makes one Check call as a unary RPC.
func (m *checkMux) unaryCall(ctx context.Context, req *sluicev1.PeerCheckRequest) ([]*sluicev1.PeerResult, error) {
	resp, err := m.p.rpc.Check(ctx, req)
	return resp.GetResults(), err
}

// ready waits until the peer's connection is up, as a unary call without
// WaitForReady would: it fails at once (UNAVAILABLE) on a connection in
// TRANSIENT_FAILURE, and waits through CONNECTING until ctx ends.
func (m *checkMux) ready(ctx context.Context) error {
	cc := m.p.cc
	for {
		switch st := cc.GetState(); st {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return status.Errorf(codes.Unavailable, "peer connection is %s", st)
		default:
			if st == connectivity.Idle {
				cc.Connect()
			}
			if !cc.WaitForStateChange(ctx, st) {
				return status.FromContextError(ctx.Err()).Err()
			}
		}
	}
}

// open starts a stream and its receiver. m.mu is held; the connection was
// ready a moment ago.
func (m *checkMux) open() (*muxStream, error) {
	ctx, cancel := context.WithCancel(m.p.c.ctx)
	st, err := m.p.rpc.CheckStream(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &muxStream{stream: st, cancel: cancel}
	m.p.c.wg.Add(1)
	go m.receive(s)
	return s, nil
}

// receive answers the calls of s until its stream ends.
func (m *checkMux) receive(s *muxStream) {
	defer m.p.c.wg.Done()
	defer s.cancel()
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			m.end(s, err)
			return
		}
		if resp.GetDrain() {
			m.mu.Lock()
			s.done = true
			if m.st == s {
				m.st = nil
			}
			m.mu.Unlock()
			s.sendMu.Lock()
			_ = s.stream.CloseSend()
			s.sendMu.Unlock()
			continue
		}
		m.mu.Lock()
		c, ok := s.inflight.Remove(resp.GetId())
		m.mu.Unlock()
		if !ok {
			continue // its caller gave up
		}
		if code := codes.Code(resp.GetCode()); code != codes.OK {
			c.Fail(streamStatus(resp))
		} else if c.Claim() {
			c.Out = resp.GetResponse().GetResults()
			c.Answer(nil)
		}
	}
}

// end fails the calls still in flight on s, whose stream ended with err.
func (m *checkMux) end(s *muxStream, err error) {
	m.mu.Lock()
	s.done = true
	if m.st == s {
		m.st = nil
	}
	inflight := s.inflight.Drain()
	switch status.Code(err) {
	case codes.Unimplemented:
		m.unary = true
		err = errNoCheckStream
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable:
		err = status.Error(status.Code(err), fmt.Sprintf("peer stream ended: %v", err))
	default:
		// io.EOF after a drain, or a transport error: these calls got
		// no answer, so they count as the peer being unavailable.
		err = status.Error(codes.Unavailable, fmt.Sprintf("peer stream ended: %v", err))
	}
	m.mu.Unlock()
	for _, c := range inflight {
		c.Fail(err)
	}
}
