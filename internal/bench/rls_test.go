package bench

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// countingRLS is a ShouldRateLimit server for the RLS target's tests: in
// domain "bench", every descriptor's first entry value gets limit calls in
// one window that never ends; other domains match no rule.
type countingRLS struct {
	rlspb.UnimplementedRateLimitServiceServer
	limit uint32

	mu     sync.Mutex
	counts map[string]uint32
	seen   []*rlspb.RateLimitRequest
}

func (s *countingRLS) ShouldRateLimit(_ context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) < 4 {
		s.seen = append(s.seen, req)
	}
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}
	for _, d := range req.Descriptors {
		st := &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
		if req.Domain == "bench" {
			v := d.Entries[0].Value
			s.counts[v]++
			st.CurrentLimit = &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: s.limit, Unit: rlspb.RateLimitResponse_RateLimit_HOUR}
			if s.counts[v] > s.limit {
				st.Code, resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT, rlspb.RateLimitResponse_OVER_LIMIT
			}
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	return resp, nil
}

// startRLS serves srv on loopback until the test ends.
func startRLS(t *testing.T, srv *countingRLS) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(s, srv)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Stop(); <-done })
	return ln.Addr().String()
}

// The RLS target sends one descriptor {Key: key} per key in Domain, over
// every connection, and maps OK and OVER_LIMIT to allowed and denied: a
// run admits exactly the server's limit per key.
//
// A run lasts a duration, not a count of checks: on a loaded machine 200ms
// made 6 checks, too few to exhaust any key. A run too short for every key
// to reach the server's limit and go past it (the server's own counts say)
// is run again, on a fresh server, twice as long, up to 12.8s.
func TestRLSTargetAdmitsWhatTheServerAllows(t *testing.T) {
	var (
		srv *countingRLS
		s   Summary
	)
	for d := 200 * time.Millisecond; ; d *= 2 {
		srv = &countingRLS{limit: 3, counts: map[string]uint32{}}
		s = runRLS(t, srv, d)
		if srv.exhausted(5) {
			break
		}
		if d >= 12800*time.Millisecond {
			t.Fatalf("a run of %s made %d checks: not every key went past its limit", d, s.Checks)
		}
		t.Logf("a run of %s made %d checks, too few to exhaust every key; running for twice as long", d, s.Checks)
	}
	if s.Errors != 0 || s.Allowed != 5*3 || s.Denied != s.Checks-s.Allowed || s.Denied == 0 {
		t.Fatalf("checks %d: allowed %d (want 15), denied %d, errors %d (%s)", s.Checks, s.Allowed, s.Denied, s.Errors, s.FirstError)
	}
	if s.Audit.OverBound != 0 || s.Audit.Bound != 6 || s.Audit.WorstAdmitted != 3 {
		t.Fatalf("audit %+v", s.Audit)
	}
	srv.mu.Lock()
	req := srv.seen[0]
	srv.mu.Unlock()
	if req.Domain != "bench" || len(req.Descriptors) != 2 {
		t.Fatalf("request %v: want domain bench and 2 descriptors (--batch 2)", req)
	}
	for _, d := range req.Descriptors {
		if len(d.Entries) != 1 || d.Entries[0].Key != "k" || !strings.HasPrefix(d.Entries[0].Value, "bench:") {
			t.Fatalf("descriptor %v: want one entry k=bench:N", d)
		}
	}
}

// A server without the bench's rule (no current limit in its statuses) is
// an error naming the domain and the config to give it, not a run of
// allowed calls.
func TestRLSTargetNoRuleIsAnError(t *testing.T) {
	addr := startRLS(t, &countingRLS{limit: 3, counts: map[string]uint32{}})
	tg, err := NewRLSTarget(RLSConfig{Addrs: []string{addr}, Domain: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	allowed := make([]bool, 1)
	err = tg.Check(context.Background(), []string{"x"}, allowed)
	if err == nil || !strings.Contains(err.Error(), `"elsewhere"`) || !strings.Contains(err.Error(), "--print-rls-config") {
		t.Fatalf("Check: %v; want an error naming the domain and --print-rls-config", err)
	}
}

func TestRLSConfigAndUnits(t *testing.T) {
	for _, c := range []struct {
		period time.Duration
		unit   string
	}{{time.Second, "second"}, {time.Minute, "minute"}, {time.Hour, "hour"}, {24 * time.Hour, "day"}, {2 * time.Second, ""}} {
		u, err := RLSUnit(c.period)
		if u != c.unit || (err != nil) != (c.unit == "") {
			t.Errorf("RLSUnit(%s) = %q, %v; want %q", c.period, u, err, c.unit)
		}
	}
	got := RLSConfigYAML(RLSConfig{}, 100, "second")
	want := "domain: bench\ndescriptors:\n  - key: key\n    rate_limit:\n      unit: second\n      requests_per_unit: 100\n"
	if got != want {
		t.Errorf("RLSConfigYAML:\n%s\nwant:\n%s", got, want)
	}
	if _, err := NewRLSTarget(RLSConfig{}); err == nil {
		t.Error("NewRLSTarget without addresses: no error")
	}
}

// runRLS runs the bench for d through an RLS target of srv (3 workers, 5
// keys of limit 3, batches of 2, over 3 connections to 2 addresses).
func runRLS(t *testing.T, srv *countingRLS, d time.Duration) Summary {
	t.Helper()
	addr := startRLS(t, srv)
	tg, err := NewRLSTarget(RLSConfig{Addrs: []string{addr, addr}, Key: "k", Conns: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	return runOK(t, Config{Workers: 3, Keys: 5, Limit: 3, Period: time.Hour, Burst: RLSAuditBurst(3), Batch: 2,
		Duration: d}, tg)
}

// exhausted reports whether keys values were each called more than the
// limit: the run denied every one of them at least once.
func (s *countingRLS) exhausted(keys int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.counts {
		if c > s.limit {
			n++
		}
	}
	return n >= keys
}
