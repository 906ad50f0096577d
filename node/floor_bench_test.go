package node_test

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// BenchmarkGRPCEchoFloor is the floor under BenchmarkNodeCheck/grpc: what
// gRPC itself allocates on the server for one message each way on a
// long-lived stream, with a codec that allocates nothing (it copies a
// message's bytes into a reused buffer and answers with them), and the
// node's and the Go client's gRPC options (wire.ServerOptions, fixed
// flow-control windows). The server
// is in this process on a loopback port and its caller in another (the
// test binary run again as a client, proto "echo"), as in
// BenchmarkNodeCheck; the message is the bytes of the Go client's
// one-item CheckStream request. node-allocs/op is the server process's
// allocations per round trip:
//
//	go test -run '^$' -bench GRPCEchoFloor -benchmem ./node/
func BenchmarkGRPCEchoFloor(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	// The node's server options (flow-control windows, stream workers),
	// with the codec replaced.
	s := grpc.NewServer(append(wire.ServerOptions(), grpc.ForceServerCodecV2(rawCodec{}))...)
	s.RegisterService(&echoStreamDesc, nil)
	served := make(chan struct{})
	go func() { defer close(served); _ = s.Serve(ln) }()
	b.Cleanup(func() { s.Stop(); <-served })
	c := startBenchClient(b, "echo", ln.Addr().String(), 1)
	c.run(b, 200) // connect, open the stream
	b.ReportAllocs()
	b.ResetTimer()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c.run(b, b.N)
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "node-allocs/op")
}

// echoStreamDesc serves sluice.v1.RateLimiter/CheckStream as an echo.
var echoStreamDesc = grpc.ServiceDesc{
	ServiceName: "sluice.v1.RateLimiter",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "CheckStream", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			m := newRawMsg()
			for {
				if err := stream.RecvMsg(m); err != nil {
					return nil // the client closed its side
				}
				// The next message is read only after the client has
				// this answer, so its bytes are not reused before gRPC
				// has written them.
				m.sb = m.in
				if err := stream.SendMsg(m); err != nil {
					return err
				}
			}
		},
	}},
}

// rawMsg is a message as its bytes: in is what was received, out what
// is sent (out[0] is &sb).
type rawMsg struct {
	in  []byte
	sb  mem.SliceBuffer
	arr [1]mem.Buffer
}

func newRawMsg() *rawMsg {
	m := &rawMsg{}
	m.arr[0] = &m.sb
	return m
}

// rawCodec passes rawMsg's bytes through, allocating nothing once in has
// grown to a message's size.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) { return v.(*rawMsg).arr[:], nil }

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m := v.(*rawMsg)
	m.in = m.in[:0]
	for _, b := range data {
		m.in = append(m.in, b.ReadOnlyData()...)
	}
	return nil
}

// echoClient opens one echo stream per caller to addr; each check sends
// the Go client's one-item request and waits for its echo.
func echoClient(addr string, callers int) (check func(caller int) error, closeFn func(), err error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})),
		// The Go client's fixed windows: no BDP pings.
		grpc.WithInitialWindowSize(wire.FlowWindow), grpc.WithInitialConnWindowSize(wire.FlowWindow))
	if err != nil {
		return nil, nil, err
	}
	req, err := proto.Marshal(&sluicev1.CheckStreamRequest{Id: 1, Items: []*sluicev1.CheckItem{{Key: "bench:0",
		Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: 1e9, Period: durationpb.New(time.Second)}}}}})
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	streams := make([]grpc.ClientStream, callers)
	msgs := make([]*rawMsg, callers)
	for i := range streams {
		streams[i], err = conn.NewStream(context.Background(), &echoStreamDesc.Streams[0],
			"/sluice.v1.RateLimiter/CheckStream")
		if err != nil {
			_ = conn.Close()
			return nil, nil, err
		}
		msgs[i] = newRawMsg()
		msgs[i].sb = req
	}
	check = func(caller int) error {
		m := msgs[caller]
		if err := streams[caller].SendMsg(m); err != nil {
			return err
		}
		var got rawMsg
		return streams[caller].RecvMsg(&got)
	}
	return check, func() { _ = conn.Close() }, nil
}
