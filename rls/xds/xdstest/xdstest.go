// Package xdstest is a test helper: an xDS management server on loopback,
// go-control-plane's own SotW server and snapshot cache, serving
// RateLimitConfig resources to one node id, and recording what the client
// acknowledges.
package xdstest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
)

// Server is a running management server; t.Cleanup stops it.
type Server struct {
	// Addr is its "127.0.0.1:port".
	Addr   string
	nodeID string
	cache  cachev3.SnapshotCache
	grpc   *grpc.Server

	mu      sync.Mutex
	acked   string   // the version of the last ACK
	nacks   []string // the error messages of NACKs, in order
	streams int      // streams opened
	fail    int      // streams still to refuse at their opening
}

// Start serves on a :0 loopback port, with no snapshot until Push; opts
// are the gRPC server's (grpc.Creds for TLS).
func Start(t testing.TB, nodeID string, opts ...grpc.ServerOption) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{nodeID: nodeID, cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)}
	cb := serverv3.CallbackFuncs{
		StreamOpenFunc: func(context.Context, int64, string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.streams++
			if s.fail > 0 {
				s.fail--
				return errRefused
			}
			return nil
		},
		StreamRequestFunc: func(_ int64, req *discoverygrpc.DiscoveryRequest) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if req.GetErrorDetail() != nil {
				s.nacks = append(s.nacks, req.GetErrorDetail().GetMessage())
			} else if req.GetResponseNonce() != "" {
				s.acked = req.GetVersionInfo()
			}
			return nil
		},
	}
	s.grpc = grpc.NewServer(opts...)
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(s.grpc, serverv3.NewServer(ctx, s.cache, cb))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s.Addr = lis.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); _ = s.grpc.Serve(lis) }()
	t.Cleanup(func() {
		s.grpc.Stop()
		cancel()
		<-done
	})
	return s
}

// Push sets the node's snapshot: the configs, at version.
func (s *Server) Push(t testing.TB, version string, configs ...*rlsconf.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, len(configs))
	for i, c := range configs {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cache.SetSnapshot(context.Background(), s.nodeID, snap); err != nil {
		t.Fatal(err)
	}
}

// errRefused ends a stream FailStreams refuses.
var errRefused = errors.New("xdstest: stream refused")

// FailStreams makes the server refuse the next n streams as they open
// (the client sees the stream end with an error).
func (s *Server) FailStreams(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = n
}

// Stop stops serving, closing the streams (for reconnection tests).
func (s *Server) Stop() { s.grpc.Stop() }

// Acked returns the version the client last acknowledged.
func (s *Server) Acked() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked
}

// Nacks returns the error messages of the client's NACKs so far.
func (s *Server) Nacks() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.nacks...)
}

// Streams returns how many streams the client opened.
func (s *Server) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams
}

// WaitAcked polls until the client acknowledged version, or fails t after
// 10 s.
func (s *Server) WaitAcked(t testing.TB, version string) {
	t.Helper()
	Eventually(t, func() bool { return s.Acked() == version }, "the client to ACK version %q (acked %q, NACKs %q)", version, s.Acked, s.Nacks)
}

// WaitNacks polls until the client sent n NACKs, or fails t after 10 s.
func (s *Server) WaitNacks(t testing.TB, n int) {
	t.Helper()
	Eventually(t, func() bool { return len(s.Nacks()) >= n }, "%d NACKs (got %q)", n, s.Nacks)
}

// Eventually polls cond every 5 ms until it holds, or fails t after 10 s
// with the message (args that are funcs returning a value are called).
func Eventually(t testing.TB, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for i, a := range args {
				switch f := a.(type) {
				case func() string:
					args[i] = f()
				case func() []string:
					args[i] = f()
				}
			}
			t.Fatalf("timed out waiting for "+format, args...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
