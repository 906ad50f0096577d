package wire_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

func checkRequest(items int) *sluicev1.CheckRequest {
	req := &sluicev1.CheckRequest{}
	for i := 0; i < items; i++ {
		it := &sluicev1.CheckItem{Key: "user:" + strconv.Itoa(i)}
		if i%2 == 0 {
			it.Spec = &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{
				Algorithm: sluicev1.Algorithm_ALGORITHM_SLIDING_WINDOW, Limit: 100,
				Period: durationpb.New(time.Minute), Burst: 7,
				FailureMode: sluicev1.FailureMode_FAILURE_MODE_DENY}}
		} else {
			it.Spec = &sluicev1.CheckItem_Policy{Policy: "api"}
		}
		if i%3 == 0 {
			cost := int64(i)
			it.Cost = &cost
		}
		req.Items = append(req.Items, it)
	}
	return req
}

func checkResponse(items int) *sluicev1.CheckResponse {
	resp := &sluicev1.CheckResponse{}
	for i := 0; i < items; i++ {
		r := &sluicev1.CheckResult{Allowed: i%2 == 0, Limit: 100, Remaining: int64(i),
			ResetAfter: durationpb.New(time.Duration(i) * time.Millisecond),
			RetryAfter: durationpb.New(0), Source: sluicev1.Source_SOURCE_OWNER, Owner: "n1"}
		if i%5 == 0 {
			r.Error = &sluicev1.ItemError{Code: 3, Message: "bad"}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// roundTrip marshals v with each codec (the zero value's and NewCodec's),
// checks the bytes against google.golang.org/protobuf's, and unmarshals
// them into into.
func roundTrip(t *testing.T, v, into proto.Message) {
	t.Helper()
	for _, c := range []wire.Codec{{}, wire.NewCodec()} {
		data, err := c.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%T): %v", v, err)
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("Marshal(%T): %d bytes differ from proto.Marshal's %d", v, len(got), len(want))
		}
		proto.Reset(into)
		if err := c.Unmarshal(data, into); err != nil {
			t.Fatalf("Unmarshal(%T): %v", into, err)
		}
		if !proto.Equal(v, into) {
			t.Fatalf("round trip of %T: got %v, want %v", v, into, v)
		}
		data.Free()
	}
}

func TestRoundTripVT(t *testing.T) {
	// 0 items is an empty message; 1 is encoded in place (at most 64
	// bytes), 3 in a buffer of its own; 200 items is above gRPC's pooling
	// threshold.
	for _, n := range []int{0, 1, 3, 200} {
		roundTrip(t, checkRequest(n), &sluicev1.CheckRequest{})
		roundTrip(t, checkResponse(n), &sluicev1.CheckResponse{})
		roundTrip(t, &sluicev1.PeerCheckRequest{From: "n2", Items: []*sluicev1.PeerItem{
			{Hash: 1 << 63, Cost: 2, Limit: &sluicev1.PeerLimit{Limit: 10, PeriodNs: 1e9}}}},
			&sluicev1.PeerCheckRequest{})
	}
}

// NewCodec encodes a small message, such as a single-item answer, into
// memory gRPC gives back once it has written it (the last reference
// freed): none is reused while referenced, and once warm, encoding
// allocates nothing.
func TestMarshalSmallReused(t *testing.T) {
	small := func(key string) *sluicev1.CheckRequest {
		return &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{Key: key}}}
	}
	want := func(key string) []byte {
		b, err := proto.Marshal(small(key))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	c := wire.NewCodec()
	marshal := func(key string) mem.BufferSlice {
		data, err := c.Marshal(small(key))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	a := marshal("a")
	a.Ref() // as gRPC's transport does until written
	a.Free()
	b := marshal("b") // a is still referenced: not its memory
	if !bytes.Equal(a.Materialize(), want("a")) || !bytes.Equal(b.Materialize(), want("b")) {
		t.Fatalf("a = %q, b = %q", a.Materialize(), b.Materialize())
	}
	a.Free()
	b.Free()
	for _, key := range []string{"c", "dd", ""} {
		d := marshal(key)
		if got := d.Materialize(); !bytes.Equal(got, want(key)) {
			t.Fatalf("after reuse: %q, want %q", got, want(key))
		}
		d.Free()
	}

	if raceEnabled {
		return // the race detector allocates, and sync.Pool drops items at random
	}
	resp := checkResponse(1)
	resp.Results[0].Error = nil
	if n := proto.Size(resp); n > 64 {
		t.Fatalf("the answer has %d bytes, want a small one", n)
	}
	allocs := testing.AllocsPerRun(100, func() {
		data, err := c.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		data.Free()
	})
	if allocs != 0 {
		t.Errorf("Marshal of a %d-byte message: %v allocations, want 0", proto.Size(resp), allocs)
	}
}

func TestRoundTripNonVT(t *testing.T) {
	roundTrip(t, &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING},
		&healthpb.HealthCheckResponse{})
	roundTrip(t, &healthpb.HealthCheckRequest{Service: strings.Repeat("s", 5000)},
		&healthpb.HealthCheckRequest{})
	roundTrip(t, durationpb.New(90*time.Second), &durationpb.Duration{})
}

// Unmarshal replaces the target's contents, like proto.Unmarshal, though
// vtprotobuf's UnmarshalVT merges.
func TestUnmarshalReplaces(t *testing.T) {
	c := wire.Codec{}
	data, err := c.Marshal(checkRequest(2))
	if err != nil {
		t.Fatal(err)
	}
	defer data.Free()
	into := checkRequest(5)
	if err := c.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(into, checkRequest(2)) {
		t.Fatalf("got %d items, want the 2 decoded", len(into.Items))
	}
}

// Decoding into a message from a vtprotobuf pool reuses its results.
func TestUnmarshalPooled(t *testing.T) {
	c := wire.Codec{}
	want := &sluicev1.PeerCheckResponse{Owner: "n1"}
	for i := 0; i < 100; i++ {
		want.Results = append(want.Results, &sluicev1.PeerResult{Allowed: true, Limit: 10, Remaining: int64(i)})
	}
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	data := mem.BufferSlice{mem.SliceBuffer(b)}
	fresh := testing.AllocsPerRun(20, func() {
		if err := c.Unmarshal(data, &sluicev1.PeerCheckResponse{}); err != nil {
			t.Fatal(err)
		}
	})
	pooled := testing.AllocsPerRun(20, func() {
		resp := sluicev1.PeerCheckResponseFromVTPool()
		if err := c.Unmarshal(data, resp); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(resp, want) {
			t.Fatal("pooled decode differs")
		}
		resp.ReturnToVTPool()
	})
	t.Logf("allocs per decode of 100 results: fresh %v, pooled %v", fresh, pooled)
	// The race detector makes sync.Pool drop items at random.
	if pooled > fresh/2 && !raceEnabled {
		t.Errorf("pooled decode: %v allocs, fresh: %v; want pooled far fewer", pooled, fresh)
	}
}

// A message that arrives in several buffers decodes like one in one buffer.
func TestUnmarshalSplitBuffers(t *testing.T) {
	want := checkResponse(50)
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var data mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), 100)
		data = append(data, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	got := &sluicev1.CheckResponse{}
	if err := (wire.Codec{}).Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatal("split buffers decoded differently")
	}
}

func TestNotAMessage(t *testing.T) {
	c := wire.Codec{}
	if _, err := c.Marshal("x"); err == nil {
		t.Error("Marshal of a string: no error")
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{1})}, new(int)); err == nil {
		t.Error("Unmarshal into an *int: no error")
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, &sluicev1.CheckRequest{}); err == nil {
		t.Error("Unmarshal of garbage: no error")
	}
	if c.Name() != "proto" {
		t.Errorf("Name() = %q, want proto", c.Name())
	}
}

// echo answers Check with one result per item, owned by the item's key.
type echo struct {
	sluicev1.UnimplementedRateLimiterServer
}

func (echo) Check(_ context.Context, req *sluicev1.CheckRequest) (*sluicev1.CheckResponse, error) {
	resp := &sluicev1.CheckResponse{}
	for _, it := range req.Items {
		resp.Results = append(resp.Results, &sluicev1.CheckResult{Allowed: true, Owner: it.Key,
			ResetAfter: durationpb.New(time.Second)})
	}
	return resp, nil
}

func serve(t *testing.T, opts ...grpc.ServerOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	sluicev1.RegisterRateLimiterServer(srv, echo{})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Over real gRPC on loopback, with the codec on either side or both, both
// vtprotobuf messages (Check) and others (health, streaming too) work.
func TestGRPC(t *testing.T) {
	for _, tc := range []struct {
		name           string
		server, client bool
	}{{"both", true, true}, {"server", true, false}, {"client", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			var sopts []grpc.ServerOption
			var dopts []grpc.DialOption
			if tc.server {
				sopts = append(sopts, wire.ServerOption())
			}
			if tc.client {
				dopts = append(dopts, wire.DialOption())
			}
			conn := dial(t, serve(t, sopts...), dopts...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			hc := healthpb.NewHealthClient(conn)
			h, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if h.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health: %v", h.Status)
			}
			w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if h, err := w.Recv(); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health watch: %v, %v", h, err)
			}

			for _, n := range []int{1, 300} {
				req := checkRequest(n)
				resp, err := sluicev1.NewRateLimiterClient(conn).Check(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Results) != n {
					t.Fatalf("%d results, want %d", len(resp.Results), n)
				}
				for i, r := range resp.Results {
					if r.Owner != req.Items[i].Key || !r.Allowed || r.ResetAfter.AsDuration() != time.Second {
						t.Fatalf("results[%d] = %v", i, r)
					}
				}
			}
		})
	}
}

func BenchmarkMarshal(b *testing.B) {
	resp := checkResponse(100)
	b.ReportAllocs()
	for b.Loop() {
		data, err := (wire.Codec{}).Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		data.Free()
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	data, err := proto.Marshal(checkRequest(100))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := (wire.Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &sluicev1.CheckRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}
