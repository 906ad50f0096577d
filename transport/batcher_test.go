package transport

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/wire"
)

// echoBatcher is a batcher over ints whose flush answers out[i] = 2*in[i],
// recording batch sizes. If hold is not nil, flush waits for it first.
type echoBatcher struct {
	*batcher[int, int]
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	flushes  atomic.Int64
	maxSeen  atomic.Int64
	inflight atomic.Int64
	maxInfl  atomic.Int64
	hold     chan struct{}
}

func newEchoBatcher(maxBatch, maxInflight int, window time.Duration, hold chan struct{}) *echoBatcher {
	e := &echoBatcher{hold: hold}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.batcher = &batcher[int, int]{
		ctx: e.ctx, wg: &e.wg, pool: new(wire.Pool[int, int]),
		maxBatch: maxBatch, maxInflight: maxInflight, window: window, timeout: time.Minute,
		full: make(chan struct{}, 1),
	}
	e.flush = func(ctx context.Context, calls []*wire.Call[int, int], n int) {
		in := e.inflight.Add(1)
		defer e.inflight.Add(-1)
		for m := e.maxInfl.Load(); in > m && !e.maxInfl.CompareAndSwap(m, in); m = e.maxInfl.Load() {
		}
		if e.hold != nil {
			select {
			case <-e.hold:
			case <-ctx.Done():
			}
		}
		e.flushes.Add(1)
		for m := e.maxSeen.Load(); int64(n) > m && !e.maxSeen.CompareAndSwap(m, int64(n)); m = e.maxSeen.Load() {
		}
		live, _ := wire.Live(calls)
		for _, pc := range live {
			if pc.Claim() {
				for i, v := range pc.In {
					pc.Out[i] = 2 * v
				}
				pc.Answer(nil)
			}
		}
	}
	return e
}

func (e *echoBatcher) call(ctx context.Context, in []int) ([]int, error) {
	out := make([]int, len(in))
	pc := e.get()
	pc.In, pc.Out = in, out
	err := e.do(ctx, []*wire.Call[int, int]{pc}, nil)
	return out, err
}

func (e *echoBatcher) shutdown() {
	e.cancel()
	e.close(errClientClosed)
	e.wg.Wait()
}

// TestPeerBatcherStress runs many callers, some of which give up, against
// batchers with and without a window: every call that returns nil has its
// own answers, batches respect maxBatch and maxInflight, and every sender
// exits.
func TestPeerBatcherStress(t *testing.T) {
	for _, window := range []time.Duration{0, 50 * time.Microsecond} {
		t.Run(window.String(), func(t *testing.T) {
			const maxBatch, maxInflight, callers, calls = 8, 3, 16, 300
			e := newEchoBatcher(maxBatch, maxInflight, window, nil)
			var wg sync.WaitGroup
			var ok, gaveUp atomic.Int64
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for k := range calls {
						in := make([]int, 1+rng.IntN(maxBatch))
						for i := range in {
							in[i] = g*1_000_000 + k*100 + i
						}
						ctx, cancel := context.WithCancel(context.Background())
						if rng.IntN(10) == 0 {
							cancel() // some give up at once, some while queued
						} else if rng.IntN(10) == 0 {
							go cancel()
						}
						out, err := e.call(ctx, in)
						cancel()
						switch {
						case err == nil:
							ok.Add(1)
							for i := range in {
								if out[i] != 2*in[i] {
									t.Errorf("caller %d call %d: out[%d] = %d, want %d", g, k, i, out[i], 2*in[i])
									return
								}
							}
						case errors.Is(err, context.Canceled):
							gaveUp.Add(1)
						default:
							t.Errorf("caller %d call %d: %v", g, k, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			e.shutdown()
			t.Logf("%d answered, %d gave up, %d flushes", ok.Load(), gaveUp.Load(), e.flushes.Load())
			if m := e.maxSeen.Load(); m > maxBatch {
				t.Errorf("a batch had %d items, more than maxBatch %d", m, maxBatch)
			}
			if m := e.maxInfl.Load(); m > maxInflight {
				t.Errorf("%d flushes at once, more than maxInflight %d", m, maxInflight)
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.senders != 0 || e.pending != 0 || e.queue.Len() != 0 {
				t.Errorf("after shutdown: %d senders, %d pending, %d queued", e.senders, e.pending, e.queue.Len())
			}
		})
	}
}

// TestPeerBatcherCloseAnswersQueued: close fails the queued calls with its
// error and refuses new ones.
func TestPeerBatcherCloseAnswersQueued(t *testing.T) {
	hold := make(chan struct{})
	e := newEchoBatcher(4, 1, 0, hold)
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := e.call(ctx, []int{1})
		first <- err
	}()
	waitFor(t, "the first call in flight", func() bool { return e.inflight.Load() == 1 })
	queued := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := e.call(ctx, []int{2, 3})
			queued <- err
		}()
	}
	waitFor(t, "three calls queued", func() bool { return e.queuedItems() == 6 })
	e.close(errClientClosed)
	for range 3 {
		if err := <-queued; !errors.Is(err, errClientClosed) {
			t.Errorf("queued call: %v, want the close error", err)
		}
	}
	if _, err := e.call(ctx, []int{4}); !errors.Is(err, errClientClosed) {
		t.Errorf("call after close: %v, want the close error", err)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Errorf("call in flight at close: %v, want its answer", err)
	}
	e.shutdown()
}

// queuedItems is the number of items waiting in b's queue.
func (b *batcher[I, O]) queuedItems() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queue.Items()
}

// idle reports whether b has no sender goroutine.
func (b *batcher[I, O]) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.senders == 0
}
