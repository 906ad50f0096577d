package wire

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// MaxConcurrentStreams is the most concurrent streams (calls) a Sluice
// gRPC server admits on one client connection (grpc.MaxConcurrentStreams):
// a client that opens more waits for one to end. Clients of Sluice use one
// CheckStream per node plus their unary calls.
const MaxConcurrentStreams = 1024

// MaxStreamInflight is the most messages of one stream of batches that a
// server decides at once (ServeBatches): once that many await their
// answers, the server reads no more from the stream until one is
// answered, so a client that floods a stream without reading the replies
// is held back by HTTP/2 flow control instead of costing a goroutine per
// message. Sluice's clients keep a few messages in flight per stream
// (client.Config.MaxInflight, transport.PeerClientConfig.MaxInflight), but
// a message whose caller gave up (a timeout) is no longer counted by the
// client while the server still decides it: a bound of 64 stalled whole
// peer streams under load (node's TestClusterConcurrentChecksExact), 1024
// does not.
const MaxStreamInflight = 1024

// Recovery turns a panic in a server handler into a codes.Internal error,
// a log line with the stack and a count, instead of a crashed process. The
// zero Recovery logs to slog.Default() and counts nothing. A nil
// *Recovery is the zero one.
type Recovery struct {
	// Logger receives one line per panic; nil means slog.Default().
	Logger *slog.Logger
	// Count, if set, is called once per panic with the full method name
	// (e.g. "/sluice.v1.Peer/CheckStream").
	Count func(method string)
}

// Recover is called with what recover() returned in a handler of method:
// it logs and counts the panic and returns the error to answer with.
func (r *Recovery) Recover(method string, v any) error {
	log := slog.Default()
	if r != nil && r.Logger != nil {
		log = r.Logger
	}
	log.Error("panic in a gRPC handler; answered INTERNAL", "method", method, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if r != nil && r.Count != nil {
		r.Count(method)
	}
	return status.Error(codes.Internal, "internal error")
}

// ServerOptions are the options every Sluice gRPC server is built with:
// unary and stream interceptors that recover a handler's panic (Recover)
// and MaxConcurrentStreams. A stream handler that starts goroutines must
// recover in them itself (ServeBatches does).
func (r *Recovery) ServerOptions() []grpc.ServerOption {
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if v := recover(); v != nil {
				resp, err = nil, r.Recover(info.FullMethod, v)
			}
		}()
		return handler(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = r.Recover(info.FullMethod, v)
			}
		}()
		return handler(srv, ss)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary),
		grpc.ChainStreamInterceptor(stream),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
	}
}
