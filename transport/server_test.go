package transport

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// fakePeer is a PeerService over a real store.Store, recording what it
// receives. If gate is not nil, Check handlers block until it is closed
// (after recording the request).
type fakePeer struct {
	st   *store.Store
	gate chan struct{}

	mu        sync.Mutex
	checks    []fakeCheck // one per CheckForwarded call, in arrival order
	handoffs  []fakeHandoff
	replicas  []store.Entry
	extra     []store.Entry // FetchMoved adds them to what it extracts (copies in transit)
	fetches   int
	arrived   chan struct{} // if not nil, signalled (non-blocking) per Check
	lastFrom  string
	lastTTL   time.Duration
	lastHops  int
	checkSeen int     // items seen by Check
	ctxErrs   []error // ctx.Err() of each gated Check once its gate wait ended
}

type fakeCheck struct {
	from  string
	hops  int
	items []limiter.Forwarded
}

type fakeHandoff struct {
	entries []store.Entry
	done    []int
}

func newFakePeer(t testing.TB, cfg store.Config) *fakePeer {
	t.Helper()
	st, err := store.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fakePeer{st: st}
}

func now() int64 { return time.Now().UnixNano() }

func (f *fakePeer) CheckForwarded(ctx context.Context, from string, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	f.mu.Lock()
	f.checks = append(f.checks, fakeCheck{from, hops, append([]limiter.Forwarded(nil), items...)})
	f.checkSeen += len(items)
	arrived, gate := f.arrived, f.gate
	f.mu.Unlock()
	if arrived != nil {
		select {
		case arrived <- struct{}{}:
		default:
		}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
		f.mu.Lock()
		f.ctxErrs = append(f.ctxErrs, ctx.Err())
		f.mu.Unlock()
	}
	t := now()
	for i, it := range items {
		var a limiter.Answer
		if it.Limit.Algorithm == bucket.Concurrency {
			_, a.Result, a.Err = f.st.Acquire(it.Hash, it.Limit, t, 0, time.Second)
		} else {
			a.Result, a.Err = f.st.Take(it.Hash, it.Limit, t, it.Cost)
		}
		out[i] = a
	}
	return nil
}

func (f *fakePeer) AcquireForwarded(_ context.Context, from string, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error) {
	f.mu.Lock()
	f.lastFrom, f.lastTTL, f.lastHops = from, ttl, hops
	f.mu.Unlock()
	id, res, err := f.st.Acquire(item.Hash, item.Limit, now(), item.Cost, ttl)
	return limiter.Answer{Result: res, Err: err}, id, nil
}

func (f *fakePeer) ReleaseForwarded(_ context.Context, from string, hops int, item limiter.Forwarded, leaseID store.LeaseID) (limiter.Answer, bool, error) {
	f.mu.Lock()
	f.lastFrom, f.lastHops = from, hops
	f.mu.Unlock()
	ok, res, err := f.st.Release(item.Hash, item.Limit, now(), leaseID)
	return limiter.Answer{Result: res, Err: err}, ok, nil
}

func (f *fakePeer) ReserveForwarded(_ context.Context, _ string, _ int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error) {
	id, res, err := f.st.Reserve(item.Hash, item.Limit, now(), item.Cost, ttl, item.Holder)
	return limiter.Answer{Result: res, Err: err}, id, nil
}

func (f *fakePeer) SettleForwarded(_ context.Context, _ string, _ int, item limiter.Forwarded, id store.LeaseID) (limiter.Answer, limiter.SettleAnswer, error) {
	id.Holder = item.Holder
	st, err := f.st.Settle(item.Hash, item.Limit, now(), id, item.Cost)
	return limiter.Answer{Result: st.Result, Err: err}, limiter.SettleAnswer{Already: st.Already, Estimate: st.Estimate, Actual: st.Actual}, nil
}

func (f *fakePeer) FetchMoved(_ context.Context, from string, hashes []uint64) ([]store.Entry, error) {
	f.mu.Lock()
	f.fetches++
	f.lastFrom = from
	extra := f.extra
	f.mu.Unlock()
	return append(f.st.Extract(now(), hashes), extra...), nil
}

func (f *fakePeer) AcceptHandoff(_ context.Context, from string, entries []store.Entry, done []int) (int, error) {
	f.mu.Lock()
	f.lastFrom = from
	f.handoffs = append(f.handoffs, fakeHandoff{entries, done})
	f.mu.Unlock()
	refused := 0
	for _, e := range entries {
		if err := f.st.Import(e, now()); errors.Is(err, store.ErrFull) {
			refused++
		}
	}
	return refused, nil
}

func (f *fakePeer) AcceptReplicas(_ context.Context, from string, entries []store.Entry) (int, error) {
	f.mu.Lock()
	f.lastFrom = from
	f.replicas = append(f.replicas, entries...)
	f.mu.Unlock()
	return 0, nil
}

func (f *fakePeer) AdminForwarded(_ context.Context, from string, hops int, item limiter.Forwarded, op limiter.AdminOp) (limiter.KeyInfo, error) {
	f.mu.Lock()
	f.lastFrom, f.lastHops = from, hops
	f.mu.Unlock()
	t := now()
	if op.Reset {
		remaining := op.Remaining
		if remaining == limiter.ResetFull {
			remaining = item.Limit.Capacity()
		}
		if err := f.st.Reset(item.Hash, item.Limit, t, remaining); err != nil {
			return limiter.KeyInfo{}, err
		}
	}
	res, err := f.st.Take(item.Hash, item.Limit, t, 0)
	return limiter.KeyInfo{Owner: "fake", Result: res, Now: t}, err
}

func (f *fakePeer) CheckAtomicForwarded(_ context.Context, from string, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	f.mu.Lock()
	f.lastFrom, f.lastHops = from, hops
	f.mu.Unlock()
	ai := make([]store.AtomicItem, len(items))
	for i, it := range items {
		ai[i] = store.AtomicItem{Key: it.Hash, Limit: it.Limit, Cost: it.Cost}
	}
	res := make([]bucket.Result, len(items))
	kept, err := f.st.TakeAll(ai, now(), res)
	for i := range out {
		out[i] = limiter.Answer{Result: res[i], Err: err}
		out[i].Allowed = out[i].Allowed && kept
	}
	return nil
}

// checkStats returns the number of Check RPCs and items the fake saw.
func (f *fakePeer) checkStats() (rpcs, items int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.checks), f.checkSeen
}

// startPeerServer serves svc on a loopback port and returns the member to
// reach it. The server stops at cleanup.
func startPeerServer(t testing.TB, name string, svc PeerService) (ring.Member, *grpc.Server) {
	t.Helper()
	m, err := NewPeerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return startPeerServerWith(t, name, svc, m)
}

// startPeerServerWith is startPeerServer recording on m.
func startPeerServerWith(t testing.TB, name string, svc PeerService, m *PeerMetrics) (ring.Member, *grpc.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := servePeerOn(t, lis, name, svc, m)
	return ring.Member{Name: name, GRPCAddr: lis.Addr().String()}, s
}

// rawPeerClient is a plain generated client, to send what PeerClient never
// would.
func rawPeerClient(t *testing.T, m ring.Member) sluicev1.PeerClient {
	t.Helper()
	cc, err := grpc.NewClient(m.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return sluicev1.NewPeerClient(cc)
}

func tokenItem(hash uint64, limit int64, cost int64) *sluicev1.PeerItem {
	return &sluicev1.PeerItem{Hash: hash, Cost: cost, Limit: &sluicev1.PeerLimit{
		Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: limit, PeriodNs: int64(time.Minute)}}
}

// badRequestField returns the field of err's BadRequest detail.
func badRequestField(t *testing.T, err error) string {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("code = %v (%v), want InvalidArgument", st.Code(), err)
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	t.Fatalf("no BadRequest detail in %v", err)
	return ""
}

func TestPeerServerCheckInvalidItemsArePerItem(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	rc := rawPeerClient(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	noPeriod := tokenItem(2, 5, 1)
	noPeriod.Limit.PeriodNs = 0
	noLimit := &sluicev1.PeerItem{Hash: 3, Cost: 1}
	badAlg := tokenItem(4, 5, 1)
	badAlg.Limit.Algorithm = sluicev1.Algorithm(99)
	negCost := tokenItem(5, 5, -1)
	bigBurst := tokenItem(6, 5, 1)
	bigBurst.Limit.Burst = bucket.MaxLimit + 1
	resp, err := rc.Check(ctx, &sluicev1.PeerCheckRequest{From: "n1", Items: []*sluicev1.PeerItem{
		tokenItem(1, 5, 1), noPeriod, noLimit, badAlg, negCost, bigBurst, tokenItem(7, 5, 2),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOwner() != "owner" {
		t.Errorf("owner = %q", resp.GetOwner())
	}
	want := []struct {
		code  codes.Code
		field string
	}{
		{codes.OK, ""},
		{codes.InvalidArgument, "items[1].limit.period_ns"},
		{codes.InvalidArgument, "items[2].limit"},
		{codes.InvalidArgument, "items[3].limit.algorithm"},
		{codes.InvalidArgument, "items[4].cost"},
		{codes.InvalidArgument, "items[5].limit.burst"},
		{codes.OK, ""},
	}
	if len(resp.GetResults()) != len(want) {
		t.Fatalf("%d results, want %d", len(resp.GetResults()), len(want))
	}
	for i, w := range want {
		r := resp.GetResults()[i]
		if codes.Code(r.GetErrorCode()) != w.code {
			t.Errorf("results[%d] code = %v (%q), want %v", i, codes.Code(r.GetErrorCode()), r.GetErrorMessage(), w.code)
		}
		if w.field != "" && !strings.HasPrefix(r.GetErrorMessage(), w.field+": ") {
			t.Errorf("results[%d] message = %q, want it to name %s", i, r.GetErrorMessage(), w.field)
		}
	}
	// The valid items were applied, at their own positions.
	if r := resp.GetResults()[0]; !r.GetAllowed() || r.GetRemaining() != 4 {
		t.Errorf("results[0] = %v, want allowed with 4 remaining", r)
	}
	if r := resp.GetResults()[6]; !r.GetAllowed() || r.GetRemaining() != 3 {
		t.Errorf("results[6] = %v, want allowed with 3 remaining", r)
	}
	if _, items := fake.checkStats(); items != 2 {
		t.Errorf("service saw %d items, want the 2 valid ones", items)
	}
}

func TestPeerServerRejectsBadRequests(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	rc := rawPeerClient(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	conc := &sluicev1.PeerItem{Hash: 1, Cost: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, Limit: 2}}
	zeroLimit := &sluicev1.PeerItem{Hash: 1, Cost: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY}}
	tooMany := make([]*sluicev1.PeerItem, MaxPeerBatch+1)
	for i := range tooMany {
		tooMany[i] = tokenItem(uint64(i), 5, 1)
	}
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"check too many items", func() error {
			_, err := rc.Check(ctx, &sluicev1.PeerCheckRequest{Items: tooMany})
			return err
		}, "items"},
		{"check hops", func() error {
			_, err := rc.Check(ctx, &sluicev1.PeerCheckRequest{Hops: 1000, Items: tooMany[:1]})
			return err
		}, "hops"},
		{"acquire without item", func() error {
			_, err := rc.Acquire(ctx, &sluicev1.PeerAcquireRequest{TtlNs: int64(time.Second)})
			return err
		}, "item"},
		{"acquire zero limit", func() error {
			_, err := rc.Acquire(ctx, &sluicev1.PeerAcquireRequest{Item: zeroLimit, TtlNs: int64(time.Second)})
			return err
		}, "item.limit.limit"},
		{"acquire negative ttl", func() error {
			_, err := rc.Acquire(ctx, &sluicev1.PeerAcquireRequest{Item: conc, TtlNs: -1})
			return err
		}, "ttl_ns"},
		{"release bad algorithm", func() error {
			_, err := rc.Release(ctx, &sluicev1.PeerReleaseRequest{Item: &sluicev1.PeerItem{Limit: &sluicev1.PeerLimit{}}})
			return err
		}, "item.limit.algorithm"},
		{"handoff log columns", func() error {
			_, err := rc.Handoff(ctx, &sluicev1.HandoffRequest{States: []*sluicev1.KeyState{
				{Hash: 1, Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Tat: 5},
				{Hash: 2, Algorithm: sluicev1.Algorithm_ALGORITHM_SLIDING_LOG, PeriodNs: 10, LogAt: []int64{1, 2}, LogCost: []int64{1}},
			}})
			return err
		}, "states[1].log_cost"},
		{"handoff log period", func() error {
			_, err := rc.Handoff(ctx, &sluicev1.HandoffRequest{States: []*sluicev1.KeyState{
				{Hash: 2, Algorithm: sluicev1.Algorithm_ALGORITHM_SLIDING_LOG, LogAt: []int64{1}, LogCost: []int64{1}},
			}})
			return err
		}, "states[0].period_ns"},
		{"handoff lease columns", func() error {
			_, err := rc.Handoff(ctx, &sluicev1.HandoffRequest{States: []*sluicev1.KeyState{
				{Hash: 2, Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, LeaseId: []uint64{1}, LeaseCost: []int64{1}},
			}})
			return err
		}, "states[0].lease_expires"},
		{"handoff algorithm", func() error {
			_, err := rc.Handoff(ctx, &sluicev1.HandoffRequest{States: []*sluicev1.KeyState{{Hash: 2}}})
			return err
		}, "states[0].algorithm"},
		{"handoff partition", func() error {
			_, err := rc.Handoff(ctx, &sluicev1.HandoffRequest{DonePartitions: []int32{1, -1}})
			return err
		}, "done_partitions[1]"},
		{"replica with partitions", func() error {
			_, err := rc.Handoff(ctx, &sluicev1.HandoffRequest{Replica: true, DonePartitions: []int32{1}})
			return err
		}, "done_partitions"},
		{"replica state", func() error {
			_, err := rc.Handoff(ctx, &sluicev1.HandoffRequest{Replica: true, States: []*sluicev1.KeyState{{Hash: 2}}})
			return err
		}, "states[0].algorithm"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := badRequestField(t, tc.call()); got != tc.field {
				t.Errorf("field = %q, want %q", got, tc.field)
			}
		})
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.checks) != 0 || len(fake.handoffs) != 0 || len(fake.replicas) != 0 {
		t.Errorf("invalid requests reached the service: %d checks, %d handoffs, %d replicas", len(fake.checks), len(fake.handoffs), len(fake.replicas))
	}
}

func TestPeerServerMetricsNil(t *testing.T) {
	// No metrics is accepted and records nothing.
	var m *PeerMetrics
	s := grpc.NewServer()
	registerPeer(t, s, newFakePeer(t, store.Config{}), "owner", m)
	m.peerServedObserver("Check").Observe(1)
	s.Stop()
}

func TestNewServerBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   ServerConfig
		field string
	}{
		{"no service", ServerConfig{Self: "a"}, "Service"},
		{"no name", ServerConfig{Service: newFakePeer(t, store.Config{})}, "Self"},
	} {
		_, err := NewServer(tc.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: err %v, want ErrInvalidConfig naming %s", tc.name, err, tc.field)
		}
	}
}

// registerPeer registers a peer Server for svc on s.
func registerPeer(t testing.TB, s *grpc.Server, svc PeerService, name string, m *PeerMetrics) {
	t.Helper()
	ps, err := NewServer(ServerConfig{Service: svc, Self: name, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ps.Register(s)
}
