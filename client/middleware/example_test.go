package middleware_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/client/middleware"
)

// Two requests a minute per client IP, behind a proxy at 10.0.0.0/8 that
// sets X-Forwarded-For; the third request is denied.
func ExampleNewHTTP() {
	c, err := client.New(client.Config{Addrs: []string{sluiceAddr()}}) // a Sluice node's gRPC address
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ip, err := middleware.ClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		panic(err)
	}
	limit, err := middleware.NewHTTP(middleware.HTTPConfig{
		Client:   c,
		FailMode: middleware.FailOpen, // if Sluice is down, serve rather than refuse
		Rules: []middleware.HTTPRule{
			{Name: "per-ip", Key: ip, Limit: client.Limit{Limit: 2, Period: time.Minute}},
		},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	h := limit(mux)

	for range 3 {
		r := httptest.NewRequest("GET", "/hello", nil)
		r.RemoteAddr = "10.0.0.1:43210"                 // the proxy
		r.Header.Set("X-Forwarded-For", "203.0.113.50") // the client it saw
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Println("Retry-After:", ra)
		}
	}
	// Output:
	// 200 "per-ip";q=2;w=60 "per-ip";r=1;t=30
	// 200 "per-ip";q=2;w=60 "per-ip";r=0;t=60
	// 429 "per-ip";q=2;w=60 "per-ip";r=0;t=60
	// Retry-After: 30
}

// The right-most address a trusted proxy did not add is the client.
func ExampleClientIP() {
	ip, err := middleware.ClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8", "2001:db8:1::/48"}})
	if err != nil {
		panic(err)
	}
	for _, tc := range []struct{ peer, xff string }{
		{"10.0.0.1:1", "198.51.100.1, 203.0.113.50, 10.0.0.2"}, // the left-most entry is the client's own claim
		{"[2001:db8:1::5]:443", "[2001:db8:9::7]:5000"},
		{"198.51.100.9:1", "203.0.113.50"}, // an untrusted peer's header is not read
		{"10.0.0.1:1", "203.0.113.50, garbage"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		r.Header.Set("X-Forwarded-For", tc.xff)
		key, _ := ip(r)
		fmt.Println(key)
	}
	// Output:
	// 203.0.113.50
	// 2001:db8:9::7
	// 198.51.100.9
	// 10.0.0.1
}

// One call an hour per method, on a gRPC server; the second call fails
// with ResourceExhausted and says when to retry and which quota it hit.
func ExampleNewGRPC() {
	c, err := client.New(client.Config{Addrs: []string{sluiceAddr()}}) // a Sluice node's gRPC address
	if err != nil {
		panic(err)
	}
	defer c.Close()
	limit, err := middleware.NewGRPC(middleware.GRPCConfig{
		Client:   c,
		FailMode: middleware.FailClosed, // if Sluice is down, refuse with Unavailable
		Rules: []middleware.GRPCRule{
			{Name: "per-method", Key: middleware.FullMethod(), Limit: client.Limit{Limit: 1, Period: time.Hour}},
		},
	})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(limit.Unary()), grpc.ChainStreamInterceptor(limit.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	for range 2 {
		_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		st := status.Convert(err)
		fmt.Println(st.Code())
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				fmt.Println("retry in about", d.GetRetryDelay().AsDuration().Round(time.Minute))
			case *errdetails.QuotaFailure:
				fmt.Println("quota:", d.GetViolations()[0].GetSubject())
			}
		}
	}
	// Output:
	// OK
	// ResourceExhausted
	// retry in about 1h0m0s
	// quota: per-method:/grpc.health.v1.Health/Check
}
