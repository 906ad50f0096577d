package transport

import (
	"context"
	"errors"
	"net"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

func newTestPeerClient(t testing.TB, cfg PeerClientConfig) *PeerClient {
	t.Helper()
	if cfg.Self == "" {
		cfg.Self = "n1"
	}
	c, err := NewPeerClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// queuedItems is the number of items waiting in b's queue.
func (b *batcher[I, O]) queuedItems() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queue.Items()
}

// peerOf returns c's connection to m (nil if none).
func (c *PeerClient) peerOf(name string) *peerConn {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.peers[name]
}

func tbLimit(limit int64) bucket.Limit {
	return bucket.Limit{Algorithm: bucket.TokenBucket, Limit: limit, Period: time.Minute}
}

// closedAddr returns a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

func TestPeerCheckRoundTrip(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	lim := tbLimit(3)
	items := []limiter.Forwarded{
		{Hash: 1, Limit: lim, Cost: 1}, {Hash: 1, Limit: lim, Cost: 1}, {Hash: 1, Limit: lim, Cost: 1},
		{Hash: 1, Limit: lim, Cost: 1},
		{Hash: 2, Limit: lim, Cost: 4}, // above capacity
		{Hash: 3, Limit: bucket.Limit{Algorithm: bucket.SlidingLog, Limit: 2, Period: time.Second}, Cost: 2},
	}
	out := make([]limiter.Answer, len(items))
	if err := c.Check(ctx, m, 0, items, out); err != nil {
		t.Fatal(err)
	}
	for i, wantRemaining := range []int64{2, 1, 0} {
		if a := out[i]; !a.Allowed || a.Remaining != wantRemaining || a.Limit != 3 || a.Err != nil {
			t.Errorf("out[%d] = %+v, want allowed with %d remaining", i, a, wantRemaining)
		}
	}
	if a := out[3]; a.Allowed || a.RetryAfter <= 0 || a.Err != nil {
		t.Errorf("out[3] = %+v, want denied with a retry-after", a)
	}
	if a := out[4]; a.Allowed || status.Code(a.Err) != codes.InvalidArgument {
		t.Errorf("out[4] = %+v, want an InvalidArgument error", a)
	}
	if a := out[5]; !a.Allowed || a.Remaining != 0 {
		t.Errorf("out[5] = %+v, want allowed with 0 remaining", a)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.checks) != 1 || fake.checks[0].from != "n1" || fake.checks[0].hops != 0 {
		t.Errorf("server saw %+v, want one Check from n1 with hops 0", fake.checks)
	}
}

func TestPeerCheckOwnerFull(t *testing.T) {
	fake := newFakePeer(t, store.Config{Shards: 1, MaxBytes: 1})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := make([]limiter.Answer, 1)
	if err := c.Check(ctx, m, 0, []limiter.Forwarded{{Hash: 9, Limit: tbLimit(5), Cost: 1}}, out); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(out[0].Err, store.ErrFull) || status.Code(out[0].Err) != codes.ResourceExhausted || out[0].Allowed {
		t.Errorf("answer = %+v (code %v), want denied with store.ErrFull / ResourceExhausted", out[0], status.Code(out[0].Err))
	}
}

func TestPeerAcquireRelease(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	item := limiter.Forwarded{Hash: 7, Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}, Cost: 1}
	var ids []uint64
	for i := range 2 {
		a, id, err := c.Acquire(ctx, m, 1, item, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Allowed || id == 0 || a.Remaining != int64(1-i) {
			t.Fatalf("acquire %d = %+v id %d, want allowed with %d remaining", i, a, id, 1-i)
		}
		ids = append(ids, id)
	}
	fake.mu.Lock()
	from, ttl, hops := fake.lastFrom, fake.lastTTL, fake.lastHops
	fake.mu.Unlock()
	if from != "n1" || ttl != time.Minute || hops != 1 {
		t.Errorf("server saw from %q ttl %v hops %d, want n1, 1m, 1", from, ttl, hops)
	}
	if a, id, err := c.Acquire(ctx, m, 0, item, time.Minute); err != nil || a.Allowed || id != 0 {
		t.Errorf("third acquire = %+v id %d err %v, want denied", a, id, err)
	}
	if a, ok, err := c.Release(ctx, m, 0, item, ids[0]); err != nil || !ok || a.Remaining != 1 {
		t.Errorf("release = %+v %v %v, want released with 1 remaining", a, ok, err)
	}
	if _, ok, err := c.Release(ctx, m, 0, item, ids[0]); err != nil || ok {
		t.Errorf("second release = %v %v, want not released", ok, err)
	}
	// A per-item error comes back in the answer, not as a call error.
	wrong := limiter.Forwarded{Hash: 8, Limit: tbLimit(2), Cost: 1}
	if a, _, err := c.Acquire(ctx, m, 0, wrong, time.Minute); err != nil || a.Err == nil || a.Allowed {
		t.Errorf("acquire on a token bucket = %+v err %v, want an answer error", a, err)
	}
}

func TestPeerFetchAndHandoff(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t0 := time.Now().UnixNano()
	var live []store.Entry
	var hashes []uint64
	for _, e := range sampleEntries(t0) {
		hashes = append(hashes, e.Key)
		if e.ExpiresAt() > t0 {
			live = append(live, e)
		}
		if err := fake.st.Import(e, t0); err != nil {
			t.Fatal(err)
		}
	}
	if len(live) != 5 {
		t.Fatalf("%d live sample entries, want one per algorithm", len(live))
	}
	got, err := c.Fetch(ctx, m, append(hashes, 12345))
	if err != nil {
		t.Fatal(err)
	}
	byKey := func(a, b store.Entry) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	}
	slices.SortFunc(got, byKey)
	if !reflect.DeepEqual(got, live) {
		t.Errorf("fetched\n %+v\nwant\n %+v", got, live)
	}
	if again, err := c.Fetch(ctx, m, hashes); err != nil || len(again) != 0 {
		t.Errorf("second fetch = %v, %v; want nothing (moved)", again, err)
	}

	if err := c.Handoff(ctx, m, live, []int{3, 7}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	hs := slices.Clone(fake.handoffs)
	fake.mu.Unlock()
	if len(hs) != 1 || !reflect.DeepEqual(hs[0].entries, live) || !slices.Equal(hs[0].done, []int{3, 7}) {
		t.Errorf("handoffs = %+v, want the 5 entries with partitions [3 7]", hs)
	}
	// The states are back in the store, so a fetch finds them again.
	if back, err := c.Fetch(ctx, m, hashes); err != nil || len(back) != len(live) {
		t.Errorf("fetch after handoff = %d entries, %v; want %d", len(back), err, len(live))
	}
}

func TestPeerHandoffSplitsLargeBatches(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t0 := time.Now().UnixNano()
	entries := make([]store.Entry, 120)
	for i := range entries {
		log := make([]bucket.LogEntry, 1000)
		for j := range log {
			log[j] = bucket.LogEntry{At: t0 - int64(len(log)-j), Cost: 1}
		}
		entries[i] = store.Entry{Key: uint64(i + 1), Algorithm: bucket.SlidingLog, Period: int64(time.Hour), Log: bucket.LogState{Entries: log}}
	}
	if err := c.Handoff(ctx, m, entries, []int{1}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.handoffs) < 2 {
		t.Fatalf("%d Handoff RPCs for ~2.4 MB of states, want several", len(fake.handoffs))
	}
	var all []store.Entry
	for i, h := range fake.handoffs {
		last := i == len(fake.handoffs)-1
		if last != (len(h.done) > 0) {
			t.Errorf("handoff %d/%d has partitions %v: want them on the last RPC only", i, len(fake.handoffs), h.done)
		}
		all = append(all, h.entries...)
	}
	if !reflect.DeepEqual(all, entries) {
		t.Errorf("received %d entries, not the %d sent in order", len(all), len(entries))
	}
}

// TestPeerCheckCoalesces holds the owner's handler while 64 callers check
// concurrently: the calls beyond MaxInflight queue and go out together, and
// each caller gets its own answers.
func TestPeerCheckCoalesces(t *testing.T) {
	for _, tc := range []struct {
		name string
		// busy first fills every in-flight slot with a blocked call, so
		// that all the callers queue.
		busy bool
		size func(i int) int
	}{
		{"one item each, peer busy", true, func(int) int { return 1 }},
		{"one item each, peer idle", false, func(int) int { return 1 }},
		{"mixed sizes, peer idle", false, func(i int) int { return i%3 + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) { testPeerCheckCoalesces(t, tc.busy, tc.size) })
	}
}

func testPeerCheckCoalesces(t *testing.T, busy bool, size func(int) int) {
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{})
	m, _ := startPeerServer(t, "owner", fake)
	pm, err := NewPeerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	const maxInflight, callers = 4, 64
	c := newTestPeerClient(t, PeerClientConfig{MaxInflight: maxInflight, Timeout: 20 * time.Second, Metrics: pm})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	blockers := 0
	if busy {
		blockers = maxInflight
		for i := range blockers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				item := []limiter.Forwarded{{Hash: 1 << 40, Limit: tbLimit(1000), Cost: 1}}
				if err := c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)); err != nil {
					t.Errorf("blocker %d: %v", i, err)
				}
			}()
			// One at a time, so that each takes its own in-flight slot.
			waitFor(t, "the blocker at the server", func() bool { rpcs, _ := fake.checkStats(); return rpcs == i+1 })
		}
	}

	// Caller i checks size(i) items whose limits identify it and the item.
	outs := make([][]limiter.Answer, callers)
	errs := make([]error, callers)
	total := blockers
	for i := range callers {
		n := size(i)
		total += n
		items := make([]limiter.Forwarded, n)
		for j := range items {
			items[j] = limiter.Forwarded{Hash: uint64(i*10 + j), Limit: tbLimit(int64(100 + i*10 + j)), Cost: 1}
		}
		outs[i] = make([]limiter.Answer, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Check(ctx, m, 0, items, outs[i])
		}()
	}
	// Wait until every item is either at the (blocked) server or queued,
	// with every allowed RPC in flight if anything is queued.
	waitFor(t, "all calls at the server or queued", func() bool {
		p := c.peerOf("owner")
		if p == nil {
			return false
		}
		rpcs, items := fake.checkStats()
		q := p.check0.queuedItems()
		return items+q == total && (q == 0 || rpcs == maxInflight)
	})
	close(fake.gate)
	wg.Wait()

	for i := range callers {
		if errs[i] != nil {
			t.Errorf("caller %d: %v", i, errs[i])
			continue
		}
		for j, a := range outs[i] {
			if want := int64(100 + i*10 + j); !a.Allowed || a.Limit != want || a.Remaining != want-1 || a.Err != nil {
				t.Errorf("caller %d item %d = %+v, want its own answer (limit %d)", i, j, a, want)
			}
		}
	}
	rpcs, items := fake.checkStats()
	t.Logf("%d callers (+%d blockers), %d items: %d Check RPCs", callers, blockers, total, rpcs)
	if items != total {
		t.Errorf("server saw %d items, want %d", items, total)
	}
	if rpcs > maxInflight+2 {
		t.Errorf("%d RPCs for %d concurrent callers, want at most MaxInflight+2 = %d", rpcs, callers, maxInflight+2)
	}
	if busy && rpcs != maxInflight+1 {
		t.Errorf("%d RPCs, want the %d blocked ones and a single batch of the queued calls", rpcs, maxInflight)
	}
	if s := pm.Snapshot(); s.CheckRPCs != uint64(rpcs) || s.ForwardedItems != uint64(total) {
		t.Errorf("metrics %+v, want %d RPCs and %d items", s, rpcs, total)
	}
}

// TestPeerCheckIdleSendsAtOnce checks that a call to an idle peer is not
// delayed: with BatchWindow 0 it is sent at once, and with a (huge) window
// it is still sent at once when it fills MaxBatch.
func TestPeerCheckIdleSendsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		batch  int
	}{
		{"no window", 0, 0},
		{"window but full batch", time.Hour, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakePeer(t, store.Config{})
			fake.arrived = make(chan struct{}, 1)
			m, _ := startPeerServer(t, "owner", fake)
			c := newTestPeerClient(t, PeerClientConfig{BatchWindow: tc.window, MaxBatch: tc.batch, Timeout: time.Hour})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			out := make([]limiter.Answer, 1)
			if err := c.Check(ctx, m, 0, []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5), Cost: 1}}, out); err != nil {
				t.Fatalf("single call on an idle client: %v", err)
			}
			select {
			case <-fake.arrived:
			default:
				t.Fatal("the server did not see the request")
			}
			if rpcs, items := fake.checkStats(); rpcs != 1 || items != 1 {
				t.Errorf("server saw %d RPCs with %d items, want 1 and 1", rpcs, items)
			}
			if !out[0].Allowed || out[0].Remaining != 4 {
				t.Errorf("answer %+v", out[0])
			}
		})
	}
}

// TestPeerCheckWindowWaitsForFullBatch: with a window, a lone small call
// waits; the call that fills MaxBatch sends both at once.
func TestPeerCheckWindowWaitsForFullBatch(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{BatchWindow: time.Hour, MaxBatch: 2, MaxInflight: 1, Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first := make(chan error, 1)
	out1 := make([]limiter.Answer, 1)
	go func() { first <- c.Check(ctx, m, 0, []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5), Cost: 1}}, out1) }()
	waitFor(t, "the first call to queue", func() bool {
		p := c.peerOf("owner")
		return p != nil && p.check0.queuedItems() == 1
	})
	if rpcs, _ := fake.checkStats(); rpcs != 0 {
		t.Fatalf("%d RPCs before the batch filled, want 0", rpcs)
	}
	out2 := make([]limiter.Answer, 1)
	if err := c.Check(ctx, m, 0, []limiter.Forwarded{{Hash: 2, Limit: tbLimit(6), Cost: 1}}, out2); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if rpcs, items := fake.checkStats(); rpcs != 1 || items != 2 {
		t.Errorf("server saw %d RPCs with %d items, want 1 with 2", rpcs, items)
	}
	if out1[0].Limit != 5 || out2[0].Limit != 6 {
		t.Errorf("answers %+v %+v mixed up", out1[0], out2[0])
	}
}

func TestPeerCheckSplitsLargeCalls(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{MaxBatch: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	items := make([]limiter.Forwarded, 10)
	for i := range items {
		items[i] = limiter.Forwarded{Hash: uint64(i), Limit: tbLimit(int64(10 + i)), Cost: 1}
	}
	out := make([]limiter.Answer, len(items))
	if err := c.Check(ctx, m, 0, items, out); err != nil {
		t.Fatal(err)
	}
	for i, a := range out {
		if a.Limit != int64(10+i) || !a.Allowed {
			t.Errorf("out[%d] = %+v, want limit %d", i, a, 10+i)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	var sizes []int
	for _, ch := range fake.checks {
		sizes = append(sizes, len(ch.items))
	}
	slices.Sort(sizes)
	if !slices.Equal(sizes, []int{2, 4, 4}) {
		t.Errorf("RPC sizes %v, want [2 4 4]", sizes)
	}
}

// TestPeerCheckHopsNotMerged: calls with different hops go in different
// requests, each carrying its own hops.
func TestPeerCheckHopsNotMerged(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{MaxInflight: 1, Timeout: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const perHops = 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*perHops)
	for hops := range 2 {
		for i := range perHops {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := make([]limiter.Answer, 1)
				errs <- c.Check(ctx, m, hops, []limiter.Forwarded{{Hash: uint64(hops)<<32 | uint64(i), Limit: tbLimit(5), Cost: 1}}, out)
			}()
		}
	}
	waitFor(t, "all calls at the server or queued", func() bool {
		p := c.peerOf("owner")
		if p == nil {
			return false
		}
		b1, err := p.checkBatcher(1)
		if err != nil {
			return false
		}
		rpcs, items := fake.checkStats()
		return rpcs == 2 && items+p.check0.queuedItems()+b1.queuedItems() == 2*perHops
	})
	close(fake.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for _, ch := range fake.checks {
		for _, it := range ch.items {
			if int(it.Hash>>32) != ch.hops {
				t.Errorf("item of hops %d sent in a request with hops %d", it.Hash>>32, ch.hops)
			}
		}
	}
	if len(fake.checks) > 4 {
		t.Errorf("%d RPCs, want at most 4 (two per hops value)", len(fake.checks))
	}
}

func TestPeerCheckCancelWhileQueued(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{})
	m, _ := startPeerServer(t, "owner", fake)
	c, err := NewPeerClient(PeerClientConfig{Self: "n1", MaxInflight: 1, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	first := make(chan error, 1)
	go func() {
		first <- c.Check(context.Background(), m, 0, []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5), Cost: 1}}, make([]limiter.Answer, 1))
	}()
	waitFor(t, "the first call at the server", func() bool { rpcs, _ := fake.checkStats(); return rpcs == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	out := make([]limiter.Answer, 1)
	go func() {
		second <- c.Check(ctx, m, 0, []limiter.Forwarded{{Hash: 2, Limit: tbLimit(5), Cost: 1}}, out)
	}()
	waitFor(t, "the second call to queue", func() bool { return c.peerOf("owner").check0.queuedItems() == 1 })
	cancel()
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call returned %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled call did not return")
	}
	close(fake.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil { // waits for the senders
		t.Fatal(err)
	}
	if rpcs, items := fake.checkStats(); rpcs != 1 || items != 1 {
		t.Errorf("server saw %d RPCs with %d items, want only the first call", rpcs, items)
	}
	if out[0] != (limiter.Answer{}) {
		t.Errorf("abandoned call's out was written: %+v", out[0])
	}
}

func TestPeerUnavailable(t *testing.T) {
	pm, err := NewPeerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The breaker is disabled: every call must reach the closed port.
	c := newTestPeerClient(t, PeerClientConfig{Timeout: 30 * time.Second, Metrics: pm, BreakerFailures: -1})
	gone := ring.Member{Name: "gone", GRPCAddr: closedAddr(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	item := limiter.Forwarded{Hash: 1, Limit: tbLimit(5), Cost: 1}
	start := time.Now()
	calls := map[string]func() error{
		"Check": func() error { return c.Check(ctx, gone, 0, []limiter.Forwarded{item}, make([]limiter.Answer, 1)) },
		"Acquire": func() error {
			_, _, err := c.Acquire(ctx, gone, 0, item, time.Second)
			return err
		},
		"Release": func() error {
			_, _, err := c.Release(ctx, gone, 0, item, 1)
			return err
		},
		"Fetch": func() error {
			_, err := c.Fetch(ctx, gone, []uint64{1})
			return err
		},
		"Handoff": func() error { return c.Handoff(ctx, gone, nil, []int{1}) },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, limiter.ErrPeerUnavailable) || status.Code(err) != codes.Unavailable {
			t.Errorf("%s to a closed port: %v (code %v), want ErrPeerUnavailable with code Unavailable", name, err, status.Code(err))
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("failing took %v, want well under the 30s timeout", d)
	}
	if c.CircuitOpen("gone") {
		t.Error("a disabled breaker opened")
	}
	if rpcs := pm.Snapshot().CheckRPCs; rpcs != 1 {
		t.Errorf("CheckRPCs = %d, want 1", rpcs)
	}
}

// TestPeerCheckServerStops: a server that goes away fails the calls in
// flight and the queued ones with ErrPeerUnavailable.
func TestPeerCheckServerStops(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, srv := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{MaxInflight: 2, Timeout: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	item := []limiter.Forwarded{{Hash: 1, Limit: tbLimit(100), Cost: 1}}
	if err := c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)); err != nil {
		t.Fatal(err)
	}

	fake.mu.Lock()
	fake.gate = make(chan struct{})
	fake.mu.Unlock()
	defer close(fake.gate)
	const callers = 8
	errs := make(chan error, callers)
	for range callers {
		go func() { errs <- c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)) }()
	}
	waitFor(t, "calls in flight and queued", func() bool {
		rpcs, items := fake.checkStats()
		q := c.peerOf("owner").check0.queuedItems()
		return items-1+q == callers && (q == 0 || rpcs == 1+2)
	})
	srv.Stop()
	for range callers {
		if err := <-errs; !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Errorf("call while the server stopped: %v, want ErrPeerUnavailable", err)
		}
	}
}

func TestPeerClientCloseStopsEverything(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{})
	lisM, srv := startPeerServer(t, "owner", fake)
	c, err := NewPeerClient(PeerClientConfig{Self: "n1", MaxInflight: 2, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no deadline: only Close can end the calls
	const callers = 8
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			errs <- c.Check(ctx, lisM, 0, []limiter.Forwarded{{Hash: uint64(i), Limit: tbLimit(5), Cost: 1}}, make([]limiter.Answer, 1))
		}()
	}
	// A Fetch too (not blocked by the gate).
	fetched := make(chan error, 1)
	go func() {
		_, err := c.Fetch(ctx, lisM, []uint64{1})
		fetched <- err
	}()
	waitFor(t, "calls in flight and queued", func() bool {
		p := c.peerOf("owner")
		if p == nil {
			return false
		}
		rpcs, items := fake.checkStats()
		q := p.check0.queuedItems()
		return items+q == callers && (q == 0 || rpcs == 2)
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range callers {
		if err := <-errs; !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Errorf("call ended by Close: %v, want ErrPeerUnavailable", err)
		}
	}
	<-fetched // whatever it got (it may have ended before Close), it returned
	if err := c.Check(ctx, lisM, 0, []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5)}}, make([]limiter.Answer, 1)); !errors.Is(err, limiter.ErrPeerUnavailable) {
		t.Errorf("Check after Close: %v, want ErrPeerUnavailable", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	close(fake.gate)
	srv.Stop()
	goleak.VerifyNone(t, ignore)
}

func TestPeerClientReplacesAndForgetsConns(t *testing.T) {
	fakeA := newFakePeer(t, store.Config{})
	fakeB := newFakePeer(t, store.Config{})
	mA, _ := startPeerServer(t, "x", fakeA)
	mB, _ := startPeerServer(t, "x", fakeB)
	c := newTestPeerClient(t, PeerClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	check := func(m ring.Member) {
		t.Helper()
		if err := c.Check(ctx, m, 0, []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5), Cost: 1}}, make([]limiter.Answer, 1)); err != nil {
			t.Fatal(err)
		}
	}
	check(mA)
	check(mA)
	pA := c.peerOf("x")
	check(mB) // same name, new address
	pB := c.peerOf("x")
	if pA == pB || pB.addr != mB.GRPCAddr {
		t.Fatal("the connection was not replaced after an address change")
	}
	if s := pA.cc.GetState(); s != connectivity.Shutdown {
		t.Errorf("old conn state %v, want Shutdown", s)
	}
	if a, _ := fakeA.checkStats(); a != 2 {
		t.Errorf("A saw %d RPCs, want 2", a)
	}
	if b, _ := fakeB.checkStats(); b != 1 {
		t.Errorf("B saw %d RPCs, want 1", b)
	}

	c.Forget(func(name string) bool { return name != "x" })
	if c.peerOf("x") != nil {
		t.Error("Forget kept a removed peer")
	}
	if s := pB.cc.GetState(); s != connectivity.Shutdown {
		t.Errorf("forgotten conn state %v, want Shutdown", s)
	}
	check(mB) // a member that comes back gets a new conn
	if b, _ := fakeB.checkStats(); b != 2 {
		t.Errorf("B saw %d RPCs, want 2", b)
	}
}

func TestPeerFetchConcurrent(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{MaxInflight: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now().UnixNano()
	const callers, per = 16, 4
	for k := range callers * per {
		e := store.Entry{Key: uint64(k + 1), Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0 + int64(time.Hour) + int64(k)}}
		if err := fake.st.Import(e, t0); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes := make([]uint64, per)
			for j := range hashes {
				hashes[j] = uint64(i*per + j + 1)
			}
			got, err := c.Fetch(ctx, m, hashes)
			if err != nil {
				t.Error(err)
				return
			}
			if len(got) != per {
				t.Errorf("caller %d got %d entries, want %d", i, len(got), per)
			}
			for _, e := range got {
				if !slices.Contains(hashes, e.Key) || e.Token.TAT != t0+int64(time.Hour)+int64(e.Key-1) {
					t.Errorf("caller %d got %+v, not one of its own", i, e)
				}
			}
		}()
	}
	wg.Wait()
}

func TestPeerMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	pm, err := NewPeerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPeerMetrics(reg); err == nil {
		t.Error("registering twice succeeded")
	}
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServerWith(t, "owner", fake, pm) // the server side records on pm too
	c := newTestPeerClient(t, PeerClientConfig{Metrics: pm})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	items := []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5), Cost: 1}, {Hash: 2, Limit: tbLimit(5), Cost: 1}}
	for range 3 {
		if err := c.Check(ctx, m, 0, items, make([]limiter.Answer, 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Check(ctx, ring.Member{Name: "gone", GRPCAddr: closedAddr(t)}, 0, items, make([]limiter.Answer, 2)); err == nil {
		t.Fatal("check to a closed port succeeded")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetHistogram() != nil:
				got[key] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"sluice_peer_rpcs_total{Check}":              4,
		"sluice_peer_rpc_errors_total{Check}":        1,
		"sluice_peer_forwarded_items_total":          8,
		"sluice_peer_batch_items":                    4,
		"sluice_peer_rpcs_total{Acquire}":            0,
		"sluice_peer_handoff_refused_total":          0,
		"sluice_peer_rpc_errors_total{Handoff}":      0,
		"sluice_peer_served_duration_seconds{Check}": 3,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if s := pm.Snapshot(); s != (PeerStats{CheckRPCs: 4, ForwardedItems: 8}) {
		t.Errorf("snapshot %+v", s)
	}
}

func TestPeerClientConfigValidation(t *testing.T) {
	for _, cfg := range []PeerClientConfig{
		{},
		{Self: "n", Timeout: -1},
		{Self: "n", MaxBatch: -1},
		{Self: "n", MaxBatch: MaxPeerBatch + 1},
		{Self: "n", BatchWindow: -1},
		{Self: "n", MaxInflight: -1},
	} {
		if c, err := NewPeerClient(cfg); err == nil {
			_ = c.Close()
			t.Errorf("NewPeerClient(%+v) succeeded", cfg)
		}
	}
	c := newTestPeerClient(t, PeerClientConfig{Self: "n"})
	if c.cfg.Timeout != DefaultPeerTimeout || c.cfg.MaxBatch != DefaultPeerMaxBatch || c.cfg.MaxInflight != DefaultPeerMaxInflight {
		t.Errorf("defaults not applied: %+v", c.cfg)
	}
	ctx := context.Background()
	if err := c.Check(ctx, ring.Member{Name: "a", GRPCAddr: "127.0.0.1:1"}, 0, make([]limiter.Forwarded, 2), make([]limiter.Answer, 1)); err == nil {
		t.Error("Check with a short out succeeded")
	}
	if err := c.Check(ctx, ring.Member{Name: "a"}, 0, make([]limiter.Forwarded, 1), make([]limiter.Answer, 1)); !errors.Is(err, limiter.ErrPeerUnavailable) {
		t.Errorf("Check to a member without address: %v", err)
	}
}

// BenchmarkPeerCheckParallel measures forwarded single-item checks from
// many goroutines to one peer over loopback, and reports the mean batch.
func BenchmarkPeerCheckParallel(b *testing.B) {
	fake := newFakePeer(b, store.Config{})
	m, _ := startPeerServer(b, "owner", fake)
	pm, _ := NewPeerMetrics(nil)
	c := newTestPeerClient(b, PeerClientConfig{Metrics: pm})
	lim := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: bucket.MaxLimit, Period: time.Second}
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		items := []limiter.Forwarded{{Hash: 1, Limit: lim, Cost: 1}}
		out := make([]limiter.Answer, 1)
		for pb.Next() {
			if err := c.Check(context.Background(), m, 0, items, out); err != nil {
				b.Error(err)
				return
			}
		}
	})
	s := pm.Snapshot()
	b.ReportMetric(float64(s.ForwardedItems)/float64(max(s.CheckRPCs, 1)), "items/rpc")
}

// metricValues gathers reg into name{label values...} -> value, for
// counters and gauges.
func metricValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			switch {
			case mt.GetCounter() != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.GetGauge() != nil:
				got[key] = mt.GetGauge().GetValue()
			}
		}
	}
	return got
}

// peerRPCs is the number of peer RPCs sent and failed, all methods.
func peerRPCs(vals map[string]float64) (sent, failed float64) {
	for _, m := range peerMethods {
		sent += vals["sluice_peer_rpcs_total{"+m+"}"]
		failed += vals["sluice_peer_rpc_errors_total{"+m+"}"]
	}
	return sent, failed
}

// idle reports whether b has no sender goroutine.
func (b *batcher[I, O]) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.senders == 0
}

// fastReconnect makes a client's connections retry within milliseconds,
// so that a test can wait for a restarted peer.
func fastReconnect() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
}

// servePeerOn serves svc on lis until cleanup.
func servePeerOn(t *testing.T, lis net.Listener, name string, svc PeerService) {
	t.Helper()
	s := grpc.NewServer()
	RegisterPeer(s, svc, name, nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-served
	})
}

// TestPeerBreakerOpensAndRecovers: against a port nobody listens on, the
// first BreakerFailures calls fail as unavailable, then calls fail at once
// with ErrCircuitOpen and send no RPC; once a peer listens there and the
// cooldown has passed, a call probes, succeeds and closes the circuit.
func TestPeerBreakerOpensAndRecovers(t *testing.T) {
	const failures, cooldown = 3, 5 * time.Second
	reg := prometheus.NewRegistry()
	pm, err := NewPeerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	c := newTestPeerClient(t, PeerClientConfig{
		Timeout: 10 * time.Second, BreakerFailures: failures, BreakerCooldown: cooldown,
		Clock: clk.Now, Metrics: pm, DialOptions: fastReconnect(),
	})
	owner := ring.Member{Name: "owner", GRPCAddr: closedAddr(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	item := limiter.Forwarded{Hash: 1, Limit: tbLimit(5), Cost: 1}
	check := func() error {
		return c.Check(ctx, owner, 0, []limiter.Forwarded{item}, make([]limiter.Answer, 1))
	}

	for i := range failures {
		if c.CircuitOpen("owner") {
			t.Fatalf("circuit open after %d failures, want %d", i, failures)
		}
		err := check()
		if !errors.Is(err, limiter.ErrPeerUnavailable) || errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("call %d: %v, want ErrPeerUnavailable without ErrCircuitOpen", i, err)
		}
	}
	if !c.CircuitOpen("owner") {
		t.Fatalf("circuit closed after %d failures", failures)
	}
	vals := metricValues(t, reg)
	if vals["sluice_peer_circuit_open{owner}"] != 1 || vals["sluice_peer_circuit_opened_total"] != 1 {
		t.Errorf("circuit_open{owner} = %v, opened_total = %v; want 1, 1",
			vals["sluice_peer_circuit_open{owner}"], vals["sluice_peer_circuit_opened_total"])
	}
	sent, failed := peerRPCs(vals)
	if sent != failures || failed != failures {
		t.Fatalf("%v RPCs sent, %v failed; want %d each", sent, failed, failures)
	}

	// Open: every method fails at once, without an RPC.
	rejected := func(when string) {
		t.Helper()
		calls := map[string]func() error{
			"Check": check,
			"Acquire": func() error {
				_, _, err := c.Acquire(ctx, owner, 0, item, time.Second)
				return err
			},
			"Release": func() error {
				_, _, err := c.Release(ctx, owner, 0, item, 1)
				return err
			},
			"Fetch": func() error {
				_, err := c.Fetch(ctx, owner, []uint64{1})
				return err
			},
			"Handoff": func() error { return c.Handoff(ctx, owner, nil, []int{1}) },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, ErrCircuitOpen) || !errors.Is(err, limiter.ErrPeerUnavailable) {
				t.Errorf("%s %s: %v, want ErrCircuitOpen and ErrPeerUnavailable", name, when, err)
			}
		}
		if s, f := peerRPCs(metricValues(t, reg)); s != sent || f != failed {
			t.Errorf("%s: RPCs sent %v -> %v, failed %v -> %v; want none", when, sent, s, failed, f)
		}
	}
	rejected("while open")

	// The peer comes back on the same address.
	lis, err := net.Listen("tcp", owner.GRPCAddr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", owner.GRPCAddr, err)
	}
	fake := newFakePeer(t, store.Config{})
	servePeerOn(t, lis, "owner", fake)
	p := c.peerOf("owner")
	waitFor(t, "the connection to the restarted peer", func() bool {
		s := p.cc.GetState()
		if s == connectivity.Idle {
			p.cc.Connect()
		}
		return s == connectivity.Ready
	})
	clk.Advance(cooldown - 1)
	rejected("just before the cooldown ends") // the peer is up, but no probe yet
	if rpcs, _ := fake.checkStats(); rpcs != 0 {
		t.Fatalf("the peer saw %d Check RPCs while the circuit was open", rpcs)
	}

	clk.Advance(1)
	if err := check(); err != nil {
		t.Fatalf("probe after the cooldown: %v", err)
	}
	if c.CircuitOpen("owner") {
		t.Error("circuit still open after a successful probe")
	}
	if err := check(); err != nil {
		t.Fatalf("call after the circuit closed: %v", err)
	}
	if rpcs, _ := fake.checkStats(); rpcs != 2 {
		t.Errorf("the peer saw %d Check RPCs, want 2", rpcs)
	}
	vals = metricValues(t, reg)
	if vals["sluice_peer_circuit_open{owner}"] != 0 || vals["sluice_peer_circuit_opened_total"] != 1 {
		t.Errorf("after recovery circuit_open{owner} = %v, opened_total = %v; want 0, 1",
			vals["sluice_peer_circuit_open{owner}"], vals["sluice_peer_circuit_opened_total"])
	}

	c.Forget(func(string) bool { return false })
	if _, ok := metricValues(t, reg)["sluice_peer_circuit_open{owner}"]; ok {
		t.Error("Forget kept the peer's circuit gauge")
	}
}

// TestPeerBreakerFailsQueuedBatch: calls queued behind the RPC whose
// failure opens the circuit fail at once with ErrCircuitOpen, unsent.
func TestPeerBreakerFailsQueuedBatch(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{})
	defer close(fake.gate)
	m, srv := startPeerServer(t, "owner", fake)
	pm, err := NewPeerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestPeerClient(t, PeerClientConfig{MaxInflight: 1, Timeout: time.Minute, BreakerFailures: 1, Metrics: pm})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	item := []limiter.Forwarded{{Hash: 1, Limit: tbLimit(100), Cost: 1}}

	first := make(chan error, 1)
	go func() { first <- c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)) }()
	waitFor(t, "the first call at the server", func() bool { rpcs, _ := fake.checkStats(); return rpcs == 1 })
	const queued = 4
	errs := make(chan error, queued)
	for range queued {
		go func() { errs <- c.Check(ctx, m, 0, item, make([]limiter.Answer, 1)) }()
	}
	waitFor(t, "the calls to queue", func() bool { return c.peerOf("owner").check0.queuedItems() == queued })
	srv.Stop() // the RPC in flight fails: Unavailable
	if err := <-first; !errors.Is(err, limiter.ErrPeerUnavailable) || errors.Is(err, ErrCircuitOpen) {
		t.Errorf("call in flight: %v, want ErrPeerUnavailable without ErrCircuitOpen", err)
	}
	for range queued {
		if err := <-errs; !errors.Is(err, ErrCircuitOpen) || !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Errorf("queued call: %v, want ErrCircuitOpen and ErrPeerUnavailable", err)
		}
	}
	if n := pm.Snapshot().CheckRPCs; n != 1 {
		t.Errorf("%d Check RPCs sent, want only the first", n)
	}
}

// stallingPeer is a fakePeer whose Check, Acquire and Fetch answer only
// once release is closed, whatever their deadline: they signal arrived
// (without blocking) and wait.
type stallingPeer struct {
	*fakePeer
	arrived chan struct{}
	release chan struct{}
}

func (s *stallingPeer) stall() {
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	<-s.release
}

func (s *stallingPeer) CheckForwarded(context.Context, string, int, []limiter.Forwarded, []limiter.Answer) {
	s.stall()
}

// drain empties s.arrived.
func (s *stallingPeer) drain() {
	for {
		select {
		case <-s.arrived:
		default:
			return
		}
	}
}

func (s *stallingPeer) AcquireForwarded(context.Context, string, int, limiter.Forwarded, time.Duration) (limiter.Answer, uint64) {
	s.stall()
	return limiter.Answer{}, 0
}

func (s *stallingPeer) FetchMoved(context.Context, string, []uint64) []store.Entry {
	s.stall()
	return nil
}

// TestPeerBreakerCallerCancelDoesNotOpen: RPCs cut short by their caller
// (cancelled, or a deadline before the client's Timeout) do not count
// against the peer, while an RPC that hits the client's Timeout does.
func TestPeerBreakerCallerCancelDoesNotOpen(t *testing.T) {
	stall := &stallingPeer{fakePeer: newFakePeer(t, store.Config{}), arrived: make(chan struct{}, 1), release: make(chan struct{})}
	m, _ := startPeerServer(t, "owner", stall)
	defer close(stall.release) // before the server stops
	// One failure would open the circuit.
	c := newTestPeerClient(t, PeerClientConfig{Timeout: time.Minute, BreakerFailures: 1})
	item := limiter.Forwarded{Hash: 1, Limit: tbLimit(100), Cost: 1}
	lease := limiter.Forwarded{Hash: 2, Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}, Cost: 1}
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 20*time.Millisecond)
	}
	// A call whose RPC ends at the caller's deadline returns either the
	// caller's ctx.Err() or the RPC's DeadlineExceeded, whichever comes
	// first (the server, which learns the deadline from the request, may
	// end the RPC a hair before the caller's context does).
	deadline := func(err error) bool {
		return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
	}
	for round := range 3 {
		// Check and Fetch, batched: the RPC's deadline is the caller's.
		ctx, cancel := short()
		if err := c.Check(ctx, m, 0, []limiter.Forwarded{item}, make([]limiter.Answer, 1)); !deadline(err) {
			t.Fatalf("round %d: Check with a short deadline: %v, want a deadline error", round, err)
		}
		cancel()
		ctx, cancel = short()
		if _, err := c.Fetch(ctx, m, []uint64{1}); !deadline(err) {
			t.Fatalf("round %d: Fetch with a short deadline: %v, want a deadline error", round, err)
		}
		cancel()
		// Acquire: a short deadline, then a cancel while in flight.
		ctx, cancel = short()
		if _, _, err := c.Acquire(ctx, m, 0, lease, time.Second); !deadline(err) {
			t.Fatalf("round %d: Acquire with a short deadline: %v, want a deadline error", round, err)
		}
		cancel()
		stall.drain()
		ctx, cancel = context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, _, err := c.Acquire(ctx, m, 0, lease, time.Second)
			done <- err
		}()
		select {
		case <-stall.arrived:
		case err := <-done:
			t.Fatalf("round %d: Acquire returned %v before reaching the peer", round, err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: cancelled Acquire: %v, want context.Canceled", round, err)
		}
		// The batched RPCs record their outcome when their senders end.
		p := c.peerOf("owner")
		waitFor(t, "the senders to finish", func() bool { return p.check0.idle() && p.fetch.idle() })
		if c.CircuitOpen("owner") {
			t.Fatalf("round %d: caller cancellations opened the circuit", round)
		}
	}

	// The same stalled peer against the client's own Timeout: a failure.
	c2 := newTestPeerClient(t, PeerClientConfig{Timeout: 50 * time.Millisecond, BreakerFailures: 1})
	if _, _, err := c2.Acquire(context.Background(), m, 0, lease, time.Second); !errors.Is(err, limiter.ErrPeerUnavailable) || status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Acquire past the client's Timeout: %v, want ErrPeerUnavailable with DeadlineExceeded", err)
	}
	if !c2.CircuitOpen("owner") {
		t.Error("an RPC past the client's Timeout did not open the circuit")
	}
	if _, _, err := c2.Acquire(context.Background(), m, 0, lease, time.Second); !errors.Is(err, ErrCircuitOpen) {
		t.Errorf("Acquire on an open circuit: %v, want ErrCircuitOpen", err)
	}
}

// TestPeerBreakerAnswersDoNotOpen: per-item errors in an answer are not
// failures.
func TestPeerBreakerAnswersDoNotOpen(t *testing.T) {
	fake := newFakePeer(t, store.Config{Shards: 1, MaxBytes: 1})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{BreakerFailures: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 3 {
		out := make([]limiter.Answer, 2)
		items := []limiter.Forwarded{{Hash: uint64(i), Limit: tbLimit(5), Cost: 1}, {Hash: 100, Limit: tbLimit(5), Cost: 10}}
		if err := c.Check(ctx, m, 0, items, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Err == nil || out[1].Err == nil {
			t.Fatalf("answers %+v, want per-item errors", out)
		}
		if _, _, err := c.Acquire(ctx, m, 0, limiter.Forwarded{Hash: 5, Limit: tbLimit(5), Cost: 1}, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if c.CircuitOpen("owner") {
		t.Error("per-item errors opened the circuit")
	}
}

func TestPeerBreakerConfig(t *testing.T) {
	if c, err := NewPeerClient(PeerClientConfig{Self: "n", BreakerCooldown: -1}); err == nil {
		_ = c.Close()
		t.Error("a negative BreakerCooldown was accepted")
	}
	c := newTestPeerClient(t, PeerClientConfig{Self: "n"})
	if c.cfg.BreakerFailures != DefaultPeerBreakerFailures || c.cfg.BreakerCooldown != DefaultPeerBreakerCooldown || c.cfg.Clock == nil {
		t.Errorf("breaker defaults not applied: %+v", c.cfg)
	}
	if c.CircuitOpen("nobody") {
		t.Error("CircuitOpen of an unknown peer")
	}
}
