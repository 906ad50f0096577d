package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Default caps of one listener (see LimitsConfig).
const (
	DefaultMaxConns           = 4096
	DefaultMaxStreamsPerConn  = 128
	DefaultMaxInflightPerConn = 1024
	DefaultMaxInflight        = 4096
	// DefaultStallAfter is LimitsConfig.StallAfter's default.
	DefaultStallAfter = 10 * time.Millisecond
)

// DefaultMaxRunningPerConn is LimitsConfig.MaxRunningPerConn's default:
// 4 per GOMAXPROCS, at least 16 (more than Sluice's clients keep in
// flight on a connection: client.Config.MaxInflight 2 a stream,
// transport.PeerClientConfig.MaxInflight 4).
func DefaultMaxRunningPerConn() int { return max(16, 4*runtime.GOMAXPROCS(0)) }

// The reasons a message or a connection is refused, as counted.
const (
	RefusedConns   = "connections"
	RefusedConn    = "connection_inflight"
	RefusedNode    = "node_inflight"
	RefusedMemory  = "memory"
	RefusedStreams = "streams"
)

// ErrLimits wraps every invalid LimitsConfig.
var ErrLimits = errors.New("wire: invalid limits")

// LimitsConfig are the caps of one gRPC listener (the public API port or
// the peer port), so that no client can starve the node: zero fields take
// the Default* constants.
type LimitsConfig struct {
	// MaxConns bounds the open connections of the listener; one past it is
	// closed at once (refused, not queued: a client learns at once that
	// this node is full, rather than waiting in the kernel's backlog).
	MaxConns int
	// MaxStreamsPerConn bounds the concurrent streams (calls) of one
	// connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
	MaxStreamsPerConn int
	// MaxInflightPerConn bounds the messages and unary calls of one
	// connection being decided or answered at once, over all its streams;
	// one past it is answered RESOURCE_EXHAUSTED.
	MaxInflightPerConn int
	// MaxInflight bounds them over the whole listener, and is the size of
	// its work pool.
	MaxInflight int
	// MaxRunningPerConn bounds the admitted messages of one connection
	// being decided at once on the pool; the rest of its budget waits in
	// the connection's own queue (see flow), so a flooding connection
	// holds at most this many of the node's runnable goroutines. 0 means
	// DefaultMaxRunningPerConn().
	MaxRunningPerConn int
	// StallAfter: when none of a connection's running messages has
	// finished for this long while others are queued (they wait on the
	// network rather than compute), they stop counting against
	// MaxRunningPerConn. 0 means DefaultStallAfter.
	StallAfter time.Duration
	// Shed, if not nil, refuses new work (RESOURCE_EXHAUSTED) while the
	// process's memory is above its threshold.
	Shed *Shedder
	// Refused, if not nil, is told each refusal's reason (Refused*).
	Refused func(reason string)
}

// Limits enforce a LimitsConfig: wrap the listener with Listener, give the
// gRPC server ServerOptions, and ServeBatches a Gate per stream. Close
// stops its pool's idle workers.
type Limits struct {
	cfg      LimitsConfig
	pool     *Workers
	inflight atomic.Int64
	conns    atomic.Int64
	byAddr   sync.Map // the remote net.Addr of an open connection -> *connState
}

// connState is what Limits keep of one open connection: its messages in
// flight (admitted by Enter, until Leave) and its flow on the pool.
type connState struct {
	inflight atomic.Int64
	flow     *flow
}

// NewLimits checks cfg and builds its Limits.
func NewLimits(cfg LimitsConfig) (*Limits, error) {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxConns", &cfg.MaxConns, DefaultMaxConns},
		{"MaxStreamsPerConn", &cfg.MaxStreamsPerConn, DefaultMaxStreamsPerConn},
		{"MaxInflightPerConn", &cfg.MaxInflightPerConn, DefaultMaxInflightPerConn},
		{"MaxInflight", &cfg.MaxInflight, DefaultMaxInflight},
		{"MaxRunningPerConn", &cfg.MaxRunningPerConn, DefaultMaxRunningPerConn()},
	} {
		if *f.v < 0 {
			return nil, fmt.Errorf("%w: %s: must be >= 0 (0: %d), got %d", ErrLimits, f.name, f.def, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case cfg.StallAfter < 0:
		return nil, fmt.Errorf("%w: StallAfter: must be >= 0 (0: %s), got %s", ErrLimits, DefaultStallAfter, cfg.StallAfter)
	case cfg.StallAfter == 0:
		cfg.StallAfter = DefaultStallAfter
	}
	return &Limits{cfg: cfg, pool: NewWorkers(cfg.MaxInflight)}, nil
}

// Close stops the pool's idle workers; those at work stop after their task.
func (l *Limits) Close() { l.pool.Close() }

// Config is l's configuration, defaults filled in.
func (l *Limits) Config() LimitsConfig { return l.cfg }

func (l *Limits) refused(reason string) {
	if l.cfg.Refused != nil {
		l.cfg.Refused(reason)
	}
}

// ServerOptions bound the streams of a connection and put every unary call
// through the gate of its connection.
func (l *Limits) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxConcurrentStreams(uint32(l.cfg.MaxStreamsPerConn)), grpc.ChainUnaryInterceptor(l.unary)}
}

func (l *Limits) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	g := l.Gate(ctx)
	if err := g.Enter(); err != nil {
		return nil, err
	}
	defer g.Leave()
	return h(ctx, req)
}

// Gate is the admission of one stream's messages: the budgets of its
// connection and of the listener, and the memory shedder. The nil Gate
// admits everything.
type Gate struct {
	l    *Limits
	conn *connState // nil: a connection that did not come through Listener
}

// Gate returns the gate of the connection of ctx (a gRPC server context).
func (l *Limits) Gate(ctx context.Context) *Gate {
	g := &Gate{l: l}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		if c, ok := l.byAddr.Load(p.Addr); ok {
			g.conn = c.(*connState)
		}
	}
	return g
}

// Enter admits one message, or refuses it with a RESOURCE_EXHAUSTED error
// naming the cap; an admitted message must Leave.
func (g *Gate) Enter() error {
	if g == nil {
		return nil
	}
	l := g.l
	if l.cfg.Shed.Over() {
		l.refused(RefusedMemory)
		return status.Error(codes.ResourceExhausted, "node memory above its shedding threshold; retry later")
	}
	if g.conn != nil && g.conn.inflight.Add(1) > int64(l.cfg.MaxInflightPerConn) {
		g.conn.inflight.Add(-1)
		l.refused(RefusedConn)
		return status.Errorf(codes.ResourceExhausted, "more than %d messages in flight on this connection", l.cfg.MaxInflightPerConn)
	}
	if l.inflight.Add(1) > int64(l.cfg.MaxInflight) {
		l.inflight.Add(-1)
		if g.conn != nil {
			g.conn.inflight.Add(-1)
		}
		l.refused(RefusedNode)
		return status.Errorf(codes.ResourceExhausted, "more than %d messages in flight on this node", l.cfg.MaxInflight)
	}
	return nil
}

// Leave ends a message Enter admitted.
func (g *Gate) Leave() {
	if g == nil {
		return
	}
	g.l.inflight.Add(-1)
	if g.conn != nil {
		g.conn.inflight.Add(-1)
	}
}

// Go runs fn on the listener's pool, in its connection's flow: at once
// while fewer than MaxRunningPerConn of the connection's messages run,
// else after those queued before it on the same connection. A message
// admitted by Enter always finds a worker, as the pool is as large as the
// listener's budget.
func (g *Gate) Go(fn func()) { g.goTask(funcTask(fn)) }

// goTask is Go for a task.
func (g *Gate) goTask(t task) {
	switch {
	case g == nil:
		go t.run()
	case g.conn != nil:
		g.conn.flow.submit(t)
	case !g.l.pool.goTask(t):
		go t.run()
	}
}

// Listener wraps ln: at most MaxConns connections open at once (one more
// is closed at once, and counted), each given its in-flight budget.
func (l *Limits) Listener(ln net.Listener) net.Listener { return &limitListener{Listener: ln, l: l} }

type limitListener struct {
	net.Listener
	l *Limits
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l := ll.l
		if l.conns.Add(1) > int64(l.cfg.MaxConns) {
			l.conns.Add(-1)
			_ = c.Close()
			l.refused(RefusedConns)
			continue
		}
		lc := &limitConn{Conn: c, l: l, addr: c.RemoteAddr()}
		l.byAddr.Store(lc.addr, &connState{flow: newFlow(l.pool, l.cfg.MaxRunningPerConn, l.cfg.StallAfter)})
		return lc, nil
	}
}

type limitConn struct {
	net.Conn
	l      *Limits
	addr   net.Addr
	closed sync.Once
}

func (c *limitConn) Close() error {
	c.closed.Do(func() {
		c.l.byAddr.Delete(c.addr)
		c.l.conns.Add(-1)
	})
	return c.Conn.Close()
}
