package transport

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/store"
)

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

// A Check whose caller gives up (the client's Timeout) reaches the owner
// with its deadline, on the stream as in a unary call, so that the owner
// does not apply it after the caller has answered it another way (its
// failure mode): before timeout_ns, a stream message had no deadline, and
// an owner slowed down past the sender's timeout counted checks that the
// sender had also answered from its fallback.
func TestPeerCheckOwnerSeesCallersDeadline(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	fake.gate = make(chan struct{}) // the owner is slow: it never answers by itself
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1", Timeout: 200 * time.Millisecond})
	out := make([]limiter.Answer, 1)
	// The fake answers once its context ends (a limiter answers the items
	// DEADLINE_EXCEEDED, unapplied), which is a tenth of the timeout
	// before the caller would give up; either way the call ends.
	_ = c.Check(context.Background(), m, 0, []limiter.Forwarded{{Hash: 1, Limit: tbLimit(5), Cost: 1}}, out)
	waitFor(t, "the owner's context to end with the caller's deadline", func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return len(fake.ctxErrs) == 1 && errors.Is(fake.ctxErrs[0], context.DeadlineExceeded)
	})
	close(fake.gate)
}
