package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// run is the state shared by the workers of one Run: read-only but for the
// per-key atomics.
type run struct {
	cfg      Config
	target   Target
	ctx      context.Context
	stop     atomic.Bool // set when ctx ends
	start    time.Time
	end      time.Time
	interval float64 // open loop: nanoseconds between call due times
	ticket   atomic.Int64
	keys     []string
	admitted []atomic.Int64 // per key; unused when Hot (admitted = allowed)
	seen     []atomic.Bool  // per key: answered at least once
}

// worker is one goroutine's state; only it writes, and the progress line
// reads the atomics.
type worker struct {
	_      [64]byte // keep the atomics off other workers' cache lines
	checks atomic.Int64
	errs   atomic.Int64
	_      [64]byte

	r        *run
	rng      *rand.Rand
	hist     *shardHist // shared with other workers: hundreds of private histograms thrash the cache
	idx      []int
	keys     []string
	allowed  []bool
	call     callCtx
	nAllowed int64
	nDenied  int64
	nErrors  int64
	// first is when the first call was sent, last when the last answer
	// came; zero if none.
	first, last time.Time
	firstErr    error
	firstErrAt  time.Time
}

// Run drives cfg's load at t and measures it. It returns when cfg.Duration
// has passed and every call in flight has answered, or early, with the
// Summary of what it measured so far and ctx's error, when ctx ends. All
// its goroutines have stopped when it returns. It does not close t.
func Run(ctx context.Context, cfg Config, t Target) (Summary, error) {
	if err := cfg.Validate(); err != nil {
		return Summary{}, err
	}
	if t == nil {
		return Summary{}, errors.New("bench: nil target")
	}
	cfg = cfg.withDefaults()
	r := &run{cfg: cfg, target: t, ctx: ctx, keys: make([]string, cfg.Keys)}
	for i := range r.keys {
		r.keys[i] = cfg.KeyPrefix + strconv.Itoa(i)
	}
	if !cfg.Hot {
		r.admitted = make([]atomic.Int64, cfg.Keys)
	}
	r.seen = make([]atomic.Bool, cfg.Keys)
	if cfg.Rate > 0 {
		r.interval = float64(cfg.Batch) / cfg.Rate * float64(time.Second)
	}
	stopWatch := context.AfterFunc(ctx, func() { r.stop.Store(true) })
	defer stopWatch()

	ws := make([]*worker, cfg.Workers)
	hists := make([]*shardHist, min(cfg.Workers, histShards))
	for i := range hists {
		hists[i] = &shardHist{h: newHistogram()}
	}
	for i := range ws {
		ws[i] = &worker{
			r:       r,
			rng:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
			hist:    hists[i%len(hists)],
			idx:     make([]int, cfg.Batch),
			keys:    make([]string, cfg.Batch),
			allowed: make([]bool, cfg.Batch),
			call:    callCtx{parent: ctx, timeout: cfg.Timeout},
		}
	}
	r.start = time.Now()
	r.end = r.start.Add(cfg.Duration)
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(w.loop)
	}
	var pwg sync.WaitGroup
	progressDone := make(chan struct{})
	if cfg.Progress != nil {
		pwg.Go(func() { progress(cfg.Progress, r.start, ws, progressDone) })
	}
	wg.Wait()
	elapsed := time.Since(r.start)
	close(progressDone)
	pwg.Wait()
	return r.summarize(ws, elapsed), ctx.Err()
}

// check makes one call of Batch keys sent at now, with latency counted from
// from. It returns false when the call was cut by the run's context.
func (w *worker) check(now, from time.Time) bool {
	r := w.r
	n := len(w.keys)
	if len(r.keys) == 1 {
		for i := range w.keys {
			w.idx[i], w.keys[i] = 0, r.keys[0]
		}
	} else {
		for i := range w.keys {
			k := w.rng.IntN(len(r.keys))
			w.idx[i], w.keys[i] = k, r.keys[k]
		}
	}
	clear(w.allowed)
	if w.first.IsZero() {
		w.first = now
	}
	ctx := w.call.get(now)
	err := r.target.Check(ctx, w.keys, w.allowed)
	done := time.Now()
	if err != nil && r.ctx.Err() != nil {
		return false // stopped by the caller: not the target's error
	}
	w.last = done
	lat := int64(done.Sub(from))
	lat = max(lat, 0)
	lat = min(lat, histHighest)
	w.hist.record(lat, int64(n))
	if err != nil {
		if w.firstErr == nil {
			w.firstErr, w.firstErrAt = err, done
		}
		if ctx.Err() != nil {
			w.call.expire()
		}
		w.nErrors += int64(n)
		w.errs.Store(w.nErrors)
	} else {
		for i, ok := range w.allowed {
			k := w.idx[i]
			if ok {
				w.nAllowed++
				if r.admitted != nil {
					r.admitted[k].Add(1)
				}
			} else {
				w.nDenied++
			}
			if !r.seen[k].Load() {
				r.seen[k].Store(true)
			}
		}
	}
	w.checks.Store(w.nAllowed + w.nDenied + w.nErrors)
	return true
}

// summarize merges the workers' histograms and counters and audits the keys.
func (r *run) summarize(ws []*worker, elapsed time.Duration) Summary {
	s := Summary{Elapsed: elapsed}
	if r.cfg.Rate > 0 {
		s.Offered = r.cfg.Rate
	}
	h := newHistogram()
	var first, last, errAt time.Time
	merged := map[*shardHist]bool{}
	for _, w := range ws {
		if !merged[w.hist] {
			merged[w.hist] = true
			h.Merge(w.hist.h)
		}
		s.Allowed += w.nAllowed
		s.Denied += w.nDenied
		s.Errors += w.nErrors
		if !w.first.IsZero() && (first.IsZero() || w.first.Before(first)) {
			first = w.first
		}
		if w.last.After(last) {
			last = w.last
		}
		if w.firstErr != nil && (errAt.IsZero() || w.firstErrAt.Before(errAt)) {
			s.FirstError, errAt = w.firstErr.Error(), w.firstErrAt
		}
	}
	s.Checks = s.Allowed + s.Denied + s.Errors
	if elapsed > 0 {
		s.ChecksPerSec = float64(s.Checks) / elapsed.Seconds()
	}
	if h.TotalCount() > 0 {
		s.Latency = Latency{
			P50:  time.Duration(h.ValueAtPercentile(50)),
			P90:  time.Duration(h.ValueAtPercentile(90)),
			P99:  time.Duration(h.ValueAtPercentile(99)),
			P999: time.Duration(h.ValueAtPercentile(99.9)),
			Max:  time.Duration(h.Max()),
			Mean: time.Duration(h.Mean()),
		}
		for _, p := range distributionPercentiles {
			v := h.ValueAtPercentile(p)
			if p == 0 {
				v = h.Min() // ValueAtPercentile(0) is 0
			}
			s.Percentiles = append(s.Percentiles, Point{Percentile: p, Latency: time.Duration(v)})
		}
	}
	var window time.Duration
	if !first.IsZero() && last.After(first) {
		window = last.Sub(first)
	}
	s.Audit = audit(r, window, s.Allowed)
	return s
}
