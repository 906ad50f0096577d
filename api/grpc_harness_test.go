package api

import (
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
)

// newTestLimiter is a node-a limiter of the given policy YAML ("" for
// none), closed when the test ends.
func newTestLimiter(t *testing.T, policies string) *limiter.Limiter {
	t.Helper()
	cfg := limiter.Config{NodeName: "node-a", Registerer: prometheus.NewRegistry()}
	if policies != "" {
		set, err := policy.Parse([]byte(policies))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Policies = set
	}
	lim, err := limiter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	return lim
}

// serveGRPC serves the gRPC API built from cfg on 127.0.0.1:0 until the
// test ends and returns the API and a connection to it, which uses the
// vtprotobuf codec as Sluice's clients do (it sends invalid UTF-8 as is).
func serveGRPC(t *testing.T, cfg GRPCConfig) (*GRPC, *grpc.ClientConn) {
	t.Helper()
	g, err := NewGRPC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Server.Serve(ln) }()
	t.Cleanup(func() { g.Server.Stop(); <-served })
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), wire.DialOption())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return g, conn
}
