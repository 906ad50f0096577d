package node

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc"
)

// Default bounds (see Bounds). A check is answered in well under a
// millisecond, so a caller that needs seconds to send one request, or to
// read its answer, is broken or hostile.
const (
	// DefaultHTTPReadHeaderTimeout bounds the reading of a request's
	// headers.
	DefaultHTTPReadHeaderTimeout = 5 * time.Second
	// DefaultHTTPReadTimeout bounds the reading of a whole request, body
	// included.
	DefaultHTTPReadTimeout = 10 * time.Second
	// DefaultHTTPWriteTimeout bounds the time from the end of the request's
	// headers to the end of the answer.
	DefaultHTTPWriteTimeout = 10 * time.Second
	// DefaultHTTPIdleTimeout is how long an idle keep-alive connection is
	// kept. A proxy that keeps upstream connections alive should close
	// them sooner (nginx: keepalive_timeout in the upstream block).
	DefaultHTTPIdleTimeout = 30 * time.Second
	// DefaultHTTPMaxHeaderBytes bounds a request's headers (answered 431
	// beyond it).
	DefaultHTTPMaxHeaderBytes = 64 << 10
	// DefaultHTTPMaxBodyBytes bounds a request's body (answered 413 beyond
	// it): ample for limiter.MaxItems checks with long keys.
	DefaultHTTPMaxBodyBytes = 2 << 20
	// DefaultGRPCMaxRecvBytes bounds one received gRPC message
	// (ResourceExhausted beyond it): a Check of limiter.MaxItems items with
	// the longest keys is about 1.1 MiB, a peer Handoff at most about 1 MiB.
	DefaultGRPCMaxRecvBytes = 4 << 20
)

// Bounds limit what a caller of the node's listeners may send, and for how
// long a connection may hold the node's resources. Zero fields take the
// Default* constants above; negative ones are an error.
type Bounds struct {
	// HTTPReadHeaderTimeout bounds the reading of a request's headers.
	HTTPReadHeaderTimeout time.Duration
	// HTTPReadTimeout bounds the reading of a whole request, body included:
	// a body sent slower is cut off.
	HTTPReadTimeout time.Duration
	// HTTPWriteTimeout bounds the time from the end of a request's headers
	// to the end of its answer.
	HTTPWriteTimeout time.Duration
	// HTTPIdleTimeout is how long an idle keep-alive connection stays
	// open.
	HTTPIdleTimeout time.Duration
	// HTTPMaxHeaderBytes bounds the request line and headers of a request;
	// beyond it the answer is 431.
	HTTPMaxHeaderBytes int
	// HTTPMaxBodyBytes bounds a request's body; beyond it the answer is
	// 413 with a JSON body.
	HTTPMaxBodyBytes int64
	// GRPCMaxRecvBytes bounds one message received by the gRPC server;
	// beyond it the call fails with ResourceExhausted.
	GRPCMaxRecvBytes int
	// MaxConns bounds the open connections of each listener (gRPC, peer,
	// HTTP); one more is closed at once and counted in
	// sluice_refused_total{reason="connections"}. 0: wire.DefaultMaxConns.
	MaxConns int
	// MaxStreamsPerConn bounds the concurrent streams (calls) of one gRPC
	// connection, on the gRPC and peer ports. 0:
	// wire.DefaultMaxStreamsPerConn.
	MaxStreamsPerConn int
	// MaxInflightPerConn bounds the messages and unary calls of one gRPC
	// connection being decided or answered at once, over all its streams;
	// one more is answered RESOURCE_EXHAUSTED. 0:
	// wire.DefaultMaxInflightPerConn.
	MaxInflightPerConn int
	// MaxInflight bounds them over each gRPC listener, and sizes its
	// work pool. 0: wire.DefaultMaxInflight.
	MaxInflight int
	// ShedMemoryShare is the share of the Go memory limit above which new
	// work is refused (gRPC RESOURCE_EXHAUSTED, HTTP 503 with
	// Retry-After) until memory falls, in (0, 1]; 0:
	// wire.DefaultShedShare. Without a memory limit nothing is shed.
	ShedMemoryShare float64
}

// withDefaults returns b with its zero fields set to the defaults.
func (b Bounds) withDefaults() Bounds {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&b.HTTPReadHeaderTimeout, DefaultHTTPReadHeaderTimeout)
	def(&b.HTTPReadTimeout, DefaultHTTPReadTimeout)
	def(&b.HTTPWriteTimeout, DefaultHTTPWriteTimeout)
	def(&b.HTTPIdleTimeout, DefaultHTTPIdleTimeout)
	if b.HTTPMaxHeaderBytes == 0 {
		b.HTTPMaxHeaderBytes = DefaultHTTPMaxHeaderBytes
	}
	if b.HTTPMaxBodyBytes == 0 {
		b.HTTPMaxBodyBytes = DefaultHTTPMaxBodyBytes
	}
	if b.GRPCMaxRecvBytes == 0 {
		b.GRPCMaxRecvBytes = DefaultGRPCMaxRecvBytes
	}
	return b
}

// validate checks b; errors name the field.
func (b Bounds) validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"HTTPReadHeaderTimeout", b.HTTPReadHeaderTimeout},
		{"HTTPReadTimeout", b.HTTPReadTimeout},
		{"HTTPWriteTimeout", b.HTTPWriteTimeout},
		{"HTTPIdleTimeout", b.HTTPIdleTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("%w: Bounds.%s: must be >= 0 (0: the default)", ErrInvalidConfig, d.name)
		}
	}
	switch {
	case b.HTTPMaxHeaderBytes < 0:
		return fmt.Errorf("%w: Bounds.HTTPMaxHeaderBytes: must be >= 0 (0: the default)", ErrInvalidConfig)
	case b.HTTPMaxBodyBytes < 0:
		return fmt.Errorf("%w: Bounds.HTTPMaxBodyBytes: must be >= 0 (0: the default)", ErrInvalidConfig)
	case b.GRPCMaxRecvBytes < 0:
		return fmt.Errorf("%w: Bounds.GRPCMaxRecvBytes: must be >= 0 (0: the default)", ErrInvalidConfig)
	case b.MaxConns < 0:
		return fmt.Errorf("%w: Bounds.MaxConns: must be >= 0 (0: the default)", ErrInvalidConfig)
	case b.MaxStreamsPerConn < 0:
		return fmt.Errorf("%w: Bounds.MaxStreamsPerConn: must be >= 0 (0: the default)", ErrInvalidConfig)
	case b.MaxInflightPerConn < 0:
		return fmt.Errorf("%w: Bounds.MaxInflightPerConn: must be >= 0 (0: the default)", ErrInvalidConfig)
	case b.MaxInflight < 0:
		return fmt.Errorf("%w: Bounds.MaxInflight: must be >= 0 (0: the default)", ErrInvalidConfig)
	case !(b.ShedMemoryShare >= 0 && b.ShedMemoryShare <= 1):
		return fmt.Errorf("%w: Bounds.ShedMemoryShare: must be in (0, 1] (0: the default), got %v", ErrInvalidConfig, b.ShedMemoryShare)
	}
	return nil
}

// grpcOptions are the gRPC server options that enforce b.
func (b Bounds) grpcOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(b.GRPCMaxRecvBytes)}
}

// httpServer builds the HTTP server of handler, bounded by b.
func (b Bounds) httpServer(handler http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: b.HTTPReadHeaderTimeout,
		ReadTimeout:       b.HTTPReadTimeout,
		WriteTimeout:      b.HTTPWriteTimeout,
		IdleTimeout:       b.HTTPIdleTimeout,
		MaxHeaderBytes:    b.HTTPMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
