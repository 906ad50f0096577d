package wire

import (
	"runtime"

	"google.golang.org/grpc"
)

// FlowWindow is the HTTP/2 flow-control window (per stream and per
// connection) of every Sluice gRPC server and client: the public API, the
// peer transport and the Go client. A fixed window turns off gRPC's BDP
// estimation, whose PING per burst of data costs a write and a read on each
// side: on a stream of small check messages, as many syscalls as the checks
// themselves. 1 MiB is ample for check messages.
const FlowWindow = 1 << 20

// ServerOptions are the options of every Sluice gRPC server (and of
// cmd/benchcompare's echo, the floor it is measured against): the codec
// (ServerOption), fixed FlowWindow windows, and stream workers, 16 per
// GOMAXPROCS. With workers, a call runs on one of a pool of goroutines
// whose stacks have already grown, rather than on a new goroutine whose
// stack grows (copied) in every call, a tenth of a node's CPU under unary
// Envoy RLS calls; when all are busy (long-lived streams hold theirs), a
// call gets its own goroutine as without them.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{ServerOption(),
		grpc.InitialWindowSize(FlowWindow), grpc.InitialConnWindowSize(FlowWindow),
		grpc.NumStreamWorkers(uint32(16 * runtime.GOMAXPROCS(0)))}
}
