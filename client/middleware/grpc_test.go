package middleware_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/client/middleware"
)

// healthServer serves grpc.health.v1 (a unary Check and a streaming Watch)
// on a :0 port behind g's interceptors, and returns a client of it.
func healthServer(t *testing.T, g *middleware.GRPC) healthpb.HealthClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(g.Unary()), grpc.ChainStreamInterceptor(g.Stream()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		hs.Shutdown()
		srv.Stop()
	})
	return healthpb.NewHealthClient(conn)
}

func newGRPC(t *testing.T, c *client.Client, mode middleware.FailMode, rules ...middleware.GRPCRule) *middleware.GRPC {
	t.Helper()
	g, err := middleware.NewGRPC(middleware.GRPCConfig{Client: c, FailMode: mode, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkDeny asserts err is a ResourceExhausted whose RetryInfo is within
// (0, most] and whose QuotaFailure names exactly subjects.
func checkDeny(t *testing.T, err error, most time.Duration, subjects ...string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("status %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		}
	}
	if retry == nil || quota == nil {
		t.Fatalf("details %v: want a RetryInfo and a QuotaFailure", st.Details())
	}
	if d := retry.GetRetryDelay().AsDuration(); d <= 0 || d > most {
		t.Errorf("retry delay %s, want in (0, %s]", d, most)
	}
	var got []string
	for _, v := range quota.GetViolations() {
		got = append(got, v.GetSubject())
		if v.GetDescription() == "" {
			t.Errorf("violation %q has no description", v.GetSubject())
		}
	}
	if strings.Join(got, " ") != strings.Join(subjects, " ") {
		t.Errorf("violations %q, want %q", got, subjects)
	}
}

const checkMethod = "/grpc.health.v1.Health/Check"

func TestGRPCUnary(t *testing.T) {
	g := newGRPC(t, newClient(t), middleware.FailClosed,
		middleware.GRPCRule{Name: "g-method", Key: middleware.FullMethod(), Limit: perMinute(3)},
		middleware.GRPCRule{Name: "g-tenant", Key: middleware.Metadata("X-Tenant"), Limit: perMinute(1)})
	hc := healthServer(t, g)
	ctx := context.Background()
	tenant := metadata.AppendToOutgoingContext(ctx, "x-tenant", "acme")
	if _, err := hc.Check(tenant, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("first call: %v", err)
	}
	// The tenant's one call a minute is spent. The rules are checked all
	// or nothing: the method's rule spends nothing, two calls left.
	_, err := hc.Check(tenant, &healthpb.HealthCheckRequest{})
	checkDeny(t, err, time.Minute, "g-tenant:acme")
	// Without the metadata only the method's rule applies: its last two.
	for i := range 2 {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d without the tenant: %v", i+3, err)
		}
	}
	_, err = hc.Check(metadata.AppendToOutgoingContext(ctx, "x-tenant", "other"), &healthpb.HealthCheckRequest{})
	checkDeny(t, err, 20*time.Second, "g-method:"+checkMethod)
	// Both deny: both are named, and the delay is the longer one.
	_, err = hc.Check(tenant, &healthpb.HealthCheckRequest{})
	checkDeny(t, err, time.Minute, "g-method:"+checkMethod, "g-tenant:acme")
	if d := retryDelay(err); d <= 20*time.Second {
		t.Errorf("retry delay %s: want the tenant's, over the method's 20s", d)
	}
	// A key over Sluice's bound is bad input.
	_, err = hc.Check(metadata.AppendToOutgoingContext(ctx, "x-tenant", strings.Repeat("t", 1100)), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("long key: %v, want InvalidArgument", err)
	}
}

func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if r, ok := d.(*errdetails.RetryInfo); ok {
			return r.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// Streams are checked once, when they open: a denied stream fails before
// the handler sends anything.
func TestGRPCStream(t *testing.T) {
	g := newGRPC(t, newClient(t), middleware.FailClosed,
		middleware.GRPCRule{Name: "s-peer", Key: middleware.JoinGRPC(" ", middleware.PeerIP(), middleware.FullMethod()), Limit: perMinute(1)})
	hc := healthServer(t, g)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := first.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first stream: %v %v", resp, err)
	}
	second, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = second.Recv()
	checkDeny(t, err, time.Minute, "s-peer:127.0.0.1 /grpc.health.v1.Health/Watch")
	// Unary calls are another method, another key.
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("unary: %v", err)
	}
}

// When Sluice cannot answer, FailOpen lets calls through and FailClosed
// fails them with Unavailable; both report the error.
func TestGRPCUnreachable(t *testing.T) {
	for _, tc := range []struct {
		mode middleware.FailMode
		want codes.Code
	}{{middleware.FailOpen, codes.OK}, {middleware.FailClosed, codes.Unavailable}} {
		var reported atomic.Int64
		g, err := middleware.NewGRPC(middleware.GRPCConfig{
			Client: unreachableClient(t), FailMode: tc.mode,
			Rules:   []middleware.GRPCRule{{Name: "u", Key: middleware.PeerIP(), Limit: perMinute(5)}},
			OnError: func(context.Context, string, error) { reported.Add(1) },
		})
		if err != nil {
			t.Fatal(err)
		}
		hc := healthServer(t, g)
		_, err = hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if status.Code(err) != tc.want {
			t.Errorf("mode %d: unary: %v, want %v", tc.mode, err, tc.want)
		}
		w, err := hc.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		if status.Code(err) != tc.want {
			t.Errorf("mode %d: stream: %v, want %v", tc.mode, err, tc.want)
		}
		if reported.Load() != 2 {
			t.Errorf("mode %d: OnError called %d times, want 2", tc.mode, reported.Load())
		}
	}
}

// A rule the node refuses (a policy it does not have) fails calls with
// Internal whatever the FailMode, never lets them through, and the error
// reported wraps ErrRuleRejected.
func TestGRPCUnknownPolicy(t *testing.T) {
	for _, mode := range []middleware.FailMode{middleware.FailOpen, middleware.FailClosed} {
		var errs []error
		g, err := middleware.NewGRPC(middleware.GRPCConfig{
			Client: newClient(t), FailMode: mode,
			Rules:   []middleware.GRPCRule{{Key: middleware.FullMethod(), Policy: "no-such-grpc-policy"}},
			OnError: func(_ context.Context, _ string, err error) { errs = append(errs, err) },
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = healthServer(t, g).Check(context.Background(), &healthpb.HealthCheckRequest{})
		if status.Code(err) != codes.Internal {
			t.Errorf("mode %d: %v, want Internal", mode, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], middleware.ErrRuleRejected) {
			t.Errorf("mode %d: errors %v, want one wrapping ErrRuleRejected", mode, errs)
		}
	}
}

// Bad configuration is an error wrapping ErrConfig, never a panic.
func TestNewGRPCConfigErrors(t *testing.T) {
	c := newClient(t)
	good := middleware.GRPCRule{Name: "g", Key: middleware.PeerIP(), Limit: perMinute(1)}
	for _, tc := range []struct {
		name string
		cfg  middleware.GRPCConfig
	}{
		{"nil client", middleware.GRPCConfig{Rules: []middleware.GRPCRule{good}, FailMode: middleware.FailOpen}},
		{"no rules", middleware.GRPCConfig{Client: c, FailMode: middleware.FailClosed}},
		{"no fail mode", middleware.GRPCConfig{Client: c, Rules: []middleware.GRPCRule{good}}},
		{"no key func", middleware.GRPCConfig{Client: c, FailMode: middleware.FailOpen,
			Rules: []middleware.GRPCRule{{Name: "x", Limit: perMinute(1)}}}},
		{"no name or policy", middleware.GRPCConfig{Client: c, FailMode: middleware.FailOpen,
			Rules: []middleware.GRPCRule{{Key: middleware.PeerIP(), Limit: perMinute(1)}}}},
		{"no period", middleware.GRPCConfig{Client: c, FailMode: middleware.FailOpen,
			Rules: []middleware.GRPCRule{{Name: "x", Key: middleware.PeerIP(), Limit: client.Limit{Limit: 1}}}}},
	} {
		g, err := middleware.NewGRPC(tc.cfg)
		if !errors.Is(err, middleware.ErrConfig) || g != nil {
			t.Errorf("%s: NewGRPC = %v, %v; want nil and an ErrConfig", tc.name, g != nil, err)
		}
	}
}

// GRPCClientIP reads x-forwarded-for metadata only from a trusted peer.
func TestGRPCClientIP(t *testing.T) {
	f, err := middleware.GRPCClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := middleware.GRPCClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8"}, Header: "Forwarded"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := middleware.GRPCClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/99"}}); !errors.Is(err, middleware.ErrConfig) {
		t.Errorf("bad CIDR: %v, want an ErrConfig", err)
	}
	call := func(addr net.Addr, kv ...string) context.Context {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
		if addr == nil {
			return ctx
		}
		return peer.NewContext(ctx, &peer.Peer{Addr: addr})
	}
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	for _, tc := range []struct {
		name string
		key  middleware.GRPCKeyFunc
		ctx  context.Context
		want string
		ok   bool
	}{
		{"untrusted peer", f, call(tcp("198.51.100.7:1"), "x-forwarded-for", "203.0.113.9"), "198.51.100.7", true},
		{"trusted peer", f, call(tcp("10.0.0.1:1"), "x-forwarded-for", "1.1.1.1, 203.0.113.9, 10.0.0.2"), "203.0.113.9", true},
		{"trusted peer, garbage", f, call(tcp("10.0.0.1:1"), "x-forwarded-for", "nope"), "10.0.0.1", true},
		{"IPv4-mapped peer", f, call(tcp("[::ffff:10.0.0.1]:1"), "x-forwarded-for", "2001:db8::1"), "2001:db8::1", true},
		{"forwarded", fwd, call(tcp("10.0.0.1:1"), "forwarded", `for="[2001:db8::2]:1"`, "x-forwarded-for", "203.0.113.9"), "2001:db8::2", true},
		{"unix peer", f, call(&net.UnixAddr{Name: "/run/s.sock", Net: "unix"}, "x-forwarded-for", "203.0.113.9"), "/run/s.sock", true},
		{"no peer", f, call(nil, "x-forwarded-for", "203.0.113.9"), "", false},
	} {
		got, ok := tc.key(tc.ctx, checkMethod)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
