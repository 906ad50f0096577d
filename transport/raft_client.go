package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
)

// Defaults of RaftSenderConfig.
const (
	DefaultRaftQueueLen   = 1024
	DefaultRaftQueueBytes = 16 << 20
)

// raftBatchBytes bounds the messages of one RaftRequest (one message may
// be alone above it, up to MaxRaftMessageBytes): well under the peer
// server's default gRPC receive bound of 4 MiB.
const raftBatchBytes = 2 << 20

// RaftSenderConfig configures a RaftSender. Zero fields take their
// defaults.
type RaftSenderConfig struct {
	// Peers holds the connections to the other nodes: the Raft streams run
	// on them, with their credentials (peer mTLS, or the cluster secret's
	// identity), the peer protocol header and this node's name (Self).
	// Its Metrics count the streams (sluice_peer_rpcs_total{method="Raft"})
	// and the messages sent and dropped. Required; close the RaftSender
	// first.
	Peers *PeerClient
	// QueueLen is the most messages queued for one peer; default 1024.
	QueueLen int
	// QueueBytes is the most bytes of messages queued for one peer;
	// default 16 MiB.
	QueueBytes int
	// Unreachable, if set, is called with a peer's name when messages to
	// it were dropped because it could not be reached, or its stream
	// failed: raft.RawNode.ReportUnreachable wants to know. It is called
	// from that peer's sender goroutine, so it must not block nor call the
	// RaftSender; the RawNode must be called from the Raft loop (hand the
	// name over to it).
	Unreachable func(to string)
}

// RaftSender sends Raft messages to the other nodes over Peer.Raft without
// ever blocking its caller (the Raft loop must not wait on I/O): each peer
// has a bounded queue and a goroutine that sends what is queued, in order,
// in batches, on one stream over the peer's connection of PeerClient. A
// message is dropped, and counted, when its peer's queue is full, when the
// peer cannot be reached or its stream fails (then Unreachable is called),
// or when it is invalid; Raft retransmits what is lost. A failed stream is
// reopened for the next batch (the connection redials with gRPC's
// backoff). Messages handed to a stream count as sent: those a stream that
// failed had taken are lost uncounted. Raft traffic does not pass, nor
// count in, the peer's circuit breaker (which is the checks'). Snapshots
// are messages like any other: one over MaxRaftMessageBytes is dropped
// (invalid), so the Raft group must keep its snapshots under it, or report
// the snapshot failed itself. It is safe for concurrent use.
type RaftSender struct {
	cfg    RaftSenderConfig
	m      *PeerMetrics
	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the peers' goroutines

	mu     sync.Mutex
	peers  map[string]*raftPeer
	closed bool
}

// raftPeer is the queue of one peer and its sender goroutine's state.
type raftPeer struct {
	s      *RaftSender
	name   string
	addr   atomic.Pointer[string] // the latest address Send was given
	q      chan []byte
	qBytes atomic.Int64 // bytes in q
	stop   context.CancelFunc
}

// NewRaftSender builds a RaftSender. It starts no goroutine until the
// first Send to a peer.
func NewRaftSender(cfg RaftSenderConfig) (*RaftSender, error) {
	switch {
	case cfg.Peers == nil:
		return nil, fmt.Errorf("%w: RaftSenderConfig.Peers: is required", ErrInvalidConfig)
	case cfg.QueueLen < 0:
		return nil, fmt.Errorf("%w: RaftSenderConfig.QueueLen: must be >= 0, got %d", ErrInvalidConfig, cfg.QueueLen)
	case cfg.QueueBytes < 0:
		return nil, fmt.Errorf("%w: RaftSenderConfig.QueueBytes: must be >= 0, got %d", ErrInvalidConfig, cfg.QueueBytes)
	}
	if cfg.QueueLen == 0 {
		cfg.QueueLen = DefaultRaftQueueLen
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = DefaultRaftQueueBytes
	}
	s := &RaftSender{cfg: cfg, m: cfg.Peers.m, peers: make(map[string]*raftPeer)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Send queues msgs (each a raftpb.Message's Marshal output, which Send
// keeps: do not reuse them) for the peer named to, at addr (its peer
// port), and returns at once. What does not fit its queue is dropped. A
// new addr for a known peer applies to its next stream.
func (s *RaftSender) Send(to, addr string, msgs [][]byte) {
	if len(msgs) == 0 {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.m.raftDrop(raftDropClosed, len(msgs))
		return
	}
	p := s.peers[to]
	if p == nil {
		ctx, stop := context.WithCancel(s.ctx)
		p = &raftPeer{s: s, name: to, q: make(chan []byte, s.cfg.QueueLen), stop: stop}
		p.addr.Store(&addr)
		s.peers[to] = p
		s.wg.Add(1)
		go p.run(ctx)
	} else if *p.addr.Load() != addr {
		p.addr.Store(&addr)
	}
	s.mu.Unlock()
	for _, m := range msgs {
		if len(m) == 0 || len(m) > MaxRaftMessageBytes {
			s.m.raftDrop(raftDropInvalid, 1)
			continue
		}
		if p.qBytes.Add(int64(len(m))) > int64(s.cfg.QueueBytes) {
			p.qBytes.Add(-int64(len(m)))
			s.m.raftDrop(raftDropQueueFull, 1)
			continue
		}
		select {
		case p.q <- m:
		default:
			p.qBytes.Add(-int64(len(m)))
			s.m.raftDrop(raftDropQueueFull, 1)
		}
	}
}

// Remove stops the goroutine of the peer named name and drops what is
// queued for it (the node calls it when that peer leaves the group). A
// later Send to it starts afresh. It does not wait.
func (s *RaftSender) Remove(name string) {
	s.mu.Lock()
	p := s.peers[name]
	delete(s.peers, name)
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// Close stops every peer's goroutine, ending its stream, and waits for
// them; what was queued is dropped. Sends after Close drop their messages.
func (s *RaftSender) Close() {
	s.mu.Lock()
	s.closed = true
	s.peers = nil
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// run sends p's queue until ctx ends.
func (p *raftPeer) run(ctx context.Context) {
	defer p.s.wg.Done()
	var st *raftStream
	defer func() { st.close() }()
	batch := make([][]byte, 0, MaxRaftBatch)
	var carry []byte // the first message of the next batch
	for {
		if carry == nil {
			var ended <-chan struct{} // nil: no stream
			if st != nil {
				ended = st.done
			}
			select {
			case <-ctx.Done():
				p.dropQueued()
				return
			case <-ended:
				// Drained or failed while idle: close it now, so that a
				// draining peer is not kept waiting for the next message.
				if st.failed() {
					p.unreachable(0)
				}
				st.close()
				st = nil
				continue
			case carry = <-p.q:
				p.qBytes.Add(-int64(len(carry)))
			}
		}
		batch, carry = p.fill(append(batch[:0], carry))
		if st != nil && (st.ended() || st.addr != *p.addr.Load()) {
			failed := st.failed()
			st.close()
			st = nil
			if failed {
				p.unreachable(0)
			}
		}
		if st == nil {
			var err error
			if st, err = p.open(ctx); err != nil {
				p.unreachable(len(batch))
				continue
			}
		}
		if err := st.cs.Send(&sluicev1.RaftRequest{From: p.s.cfg.Peers.cfg.Self, Messages: batch}); err != nil {
			st.close()
			st = nil
			p.unreachable(len(batch))
			continue
		}
		p.s.m.raftSentN(len(batch))
	}
}

// fill adds to batch what is queued, without waiting, up to MaxRaftBatch
// messages and raftBatchBytes; it returns the message that did not fit
// (nil if none).
func (p *raftPeer) fill(batch [][]byte) ([][]byte, []byte) {
	size := len(batch[0])
	for len(batch) < MaxRaftBatch {
		select {
		case m := <-p.q:
			p.qBytes.Add(-int64(len(m)))
			if size+len(m) > raftBatchBytes {
				return batch, m
			}
			size += len(m)
			batch = append(batch, m)
		default:
			return batch, nil
		}
	}
	return batch, nil
}

// dropQueued counts what is left in p's queue as dropped (closed).
func (p *raftPeer) dropQueued() {
	n := 0
	for {
		select {
		case <-p.q:
			n++
		default:
			p.s.m.raftDrop(raftDropClosed, n)
			return
		}
	}
}

// unreachable counts n messages dropped because the peer was not reached,
// and reports it.
func (p *raftPeer) unreachable(n int) {
	p.s.m.raftDrop(raftDropUnreachable, n)
	if f := p.s.cfg.Unreachable; f != nil {
		f(p.name)
	}
}

// errRaftDrained ends a stream whose server asked to close it.
var errRaftDrained = errors.New("transport: raft stream drained by the peer")

// raftStream is one open Peer.Raft stream and the goroutine receiving on it
// (the server's drain, or the stream's end).
type raftStream struct {
	addr   string
	cs     sluicev1.Peer_RaftClient
	cancel context.CancelFunc
	done   chan struct{} // closed when the receiving goroutine returns
	err    error         // why the stream ended; set before done closes
}

// open opens a stream to p at its latest address.
func (p *raftPeer) open(ctx context.Context) (*raftStream, error) {
	addr := *p.addr.Load()
	pc, err := p.s.cfg.Peers.peerFor(ring.Member{Name: p.name, GRPCAddr: addr})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	p.s.m.rpc(peerRaft)
	cs, err := pc.rpc.Raft(sctx)
	if err != nil {
		cancel()
		p.s.m.rpcError(peerRaft)
		return nil, err
	}
	st := &raftStream{addr: addr, cs: cs, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(st.done)
		for {
			resp, err := cs.Recv()
			if err != nil {
				if sctx.Err() == nil && !errors.Is(err, io.EOF) {
					p.s.m.rpcError(peerRaft)
				}
				st.err = err
				return
			}
			if resp.GetDrain() {
				st.err = errRaftDrained
				return
			}
		}
	}()
	return st, nil
}

// ended reports whether the stream ended (or was drained).
func (st *raftStream) ended() bool {
	select {
	case <-st.done:
		return true
	default:
		return false
	}
}

// failed reports whether the stream ended by failing (not by the peer's
// drain). Call it only once ended.
func (st *raftStream) failed() bool { return !errors.Is(st.err, errRaftDrained) }

// close ends the stream and waits for its receiving goroutine; a nil st is
// a no-op.
func (st *raftStream) close() {
	if st == nil {
		return
	}
	_ = st.cs.CloseSend()
	st.cancel()
	<-st.done
}
