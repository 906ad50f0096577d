package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// ErrInvalid is wrapped by every error of Config.Validate.
var ErrInvalid = errors.New("bench: invalid config")

// Config describes one run.
type Config struct {
	// Workers is the number of concurrent callers (closed loop) or sender
	// goroutines (open loop); 0 means 8. Each has its own latency
	// histogram (about 150 KB).
	Workers int
	// Keys is the number of distinct keys, chosen uniformly at random per
	// check; 0 means 1000.
	Keys int
	// Hot puts every check on one key (Keys is ignored).
	Hot bool
	// KeyPrefix: keys are KeyPrefix + decimal index; "" means "bench:".
	KeyPrefix string
	// Limit, Period and Burst are the limit each key has, for the audit:
	// Limit per Period, capacity Burst (0 = Limit).
	Limit  int64
	Period time.Duration
	Burst  int64
	// Duration is how long to run; 0 means 10s.
	Duration time.Duration
	// Rate > 0 runs an open loop at Rate checks/s offered: call i is due at
	// start + i*Batch/Rate, its latency counts from then, and calls not yet
	// sent when Duration ends are dropped (so a target or a worker pool
	// too slow to keep up shows as latency and as checks/s below Rate).
	// 0 runs a closed loop.
	Rate float64
	// Batch is the number of keys per Target.Check call; 0 means 1.
	Batch int
	// Progress, if not nil, gets a live progress line (checks/s, errors),
	// rewritten with \r about every second, and a newline at the end.
	Progress io.Writer
	// Timeout is the per-call deadline; 0 means 2s. So that the hot path
	// does not allocate a context per call, each worker renews its
	// deadline context every Timeout/10: a call gets between Timeout and
	// 1.1×Timeout.
	Timeout time.Duration
}

// Validate reports the first invalid field, as an error wrapping ErrInvalid.
func (c Config) Validate() error {
	bad := func(msg string) error { return fmt.Errorf("%w: %s", ErrInvalid, msg) }
	switch {
	case c.Workers < 0:
		return bad("workers must be >= 0")
	case c.Keys < 0:
		return bad("keys must be >= 0")
	case c.Limit <= 0:
		return bad("limit must be > 0")
	case c.Period <= 0:
		return bad("period must be > 0")
	case c.Burst < 0:
		return bad("burst must be >= 0")
	case c.Duration < 0:
		return bad("duration must be >= 0")
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return bad("rate must be >= 0 and finite")
	case c.Batch < 0:
		return bad("batch must be >= 0")
	case c.Timeout < 0:
		return bad("timeout must be >= 0")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Workers == 0 {
		c.Workers = 8
	}
	if c.Keys == 0 {
		c.Keys = 1000
	}
	if c.Hot {
		c.Keys = 1
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "bench:"
	}
	if c.Burst == 0 {
		c.Burst = c.Limit
	}
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Batch == 0 {
		c.Batch = 1
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	return c
}

// The histogram's range and precision: 1µs..60s in nanoseconds, 3 digits.
const (
	histLowest  = int64(time.Microsecond)
	histHighest = int64(60 * time.Second)
	histDigits  = 3
)

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowest, histHighest, histDigits)
}

// histShards is how many histograms the workers share (worker i records
// into shard i % histShards): enough that the locks are rarely contended,
// few enough to stay in cache.
const histShards = 16

// shardHist is a histogram shared by a few workers.
type shardHist struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
	_  [64]byte
}

func (s *shardHist) record(v, n int64) {
	s.mu.Lock()
	_ = s.h.RecordValues(v, n)
	s.mu.Unlock()
}

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

// callCtx hands out the per-call deadline context, renewed every
// timeout/10 rather than made per call: a call started before renewAt has
// between timeout and 1.1×timeout.
type callCtx struct {
	parent  context.Context
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	renewAt time.Time
}

func (c *callCtx) get(now time.Time) context.Context {
	if c.ctx == nil || !now.Before(c.renewAt) {
		c.release()
		slack := c.timeout / 10
		c.ctx, c.cancel = context.WithDeadline(c.parent, now.Add(c.timeout+slack))
		c.renewAt = now.Add(slack)
	}
	return c.ctx
}

// expire makes the next get make a new context (after a call that failed
// on this one's deadline).
func (c *callCtx) expire() { c.renewAt = time.Time{} }

func (c *callCtx) release() {
	if c.cancel != nil {
		c.cancel()
		c.ctx, c.cancel = nil, nil
	}
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

// loop is a worker: closed loop, or open loop when an interval is set.
func (w *worker) loop() {
	r := w.r
	defer w.call.release()
	open := r.interval > 0
	for !r.stop.Load() {
		now := time.Now()
		if !now.Before(r.end) {
			return
		}
		from := now // latency counts from here: send time, or due time
		if open {
			i := r.ticket.Add(1) - 1
			due := r.start.Add(time.Duration(float64(i) * r.interval))
			if !due.Before(r.end) {
				return
			}
			if d := due.Sub(now); d > 0 {
				if !w.sleep(d) {
					return
				}
				now = time.Now()
			}
			from = due
		}
		if !w.check(now, from) {
			return
		}
	}
}

// sleep waits d, or less if the run stops; it reports whether the run
// goes on. Short waits (the usual: a worker is about Workers tickets
// ahead) are a plain sleep, cheaper than a timer and a select.
func (w *worker) sleep(d time.Duration) bool {
	if d <= 10*time.Millisecond {
		time.Sleep(d)
		return !w.r.stop.Load()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !w.r.stop.Load()
	case <-w.r.ctx.Done():
		return false
	}
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

// progress rewrites a progress line on out about every second until done
// is closed, then writes the final one and a newline.
func progress(out io.Writer, start time.Time, ws []*worker, done <-chan struct{}) {
	sum := func() (checks, errs int64) {
		for _, w := range ws {
			checks += w.checks.Load()
			errs += w.errs.Load()
		}
		return checks, errs
	}
	line := func(now time.Time, rate float64) {
		checks, errs := sum()
		fmt.Fprintf(out, "\r%6.1fs  %10.0f checks/s  %12d checks  %8d errors   ",
			now.Sub(start).Seconds(), rate, checks, errs)
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prevT, prevN := start, int64(0)
	for {
		select {
		case now := <-tick.C:
			n, _ := sum()
			line(now, float64(n-prevN)/now.Sub(prevT).Seconds())
			prevT, prevN = now, n
		case <-done:
			now := time.Now()
			n, _ := sum()
			line(now, float64(n)/max(now.Sub(start).Seconds(), 1e-9))
			fmt.Fprintln(out)
			return
		}
	}
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

// audit compares each answered key's admitted count with the most a correct
// limiter admits in window: a full bucket plus what refills in window.
func audit(r *run, window time.Duration, allowed int64) Audit {
	a := Audit{Bound: bound(r.cfg.Limit, r.cfg.Burst, r.cfg.Period, window), WorstAdmitted: -1}
	for k := range r.seen {
		if !r.seen[k].Load() {
			continue
		}
		a.Keys++
		n := allowed // Hot: the one key admitted every allowed check
		if r.admitted != nil {
			n = r.admitted[k].Load()
		}
		if n > a.Bound {
			a.OverBound++
		}
		if n > a.WorstAdmitted {
			a.WorstKey, a.WorstAdmitted = r.keys[k], n
		}
	}
	if a.Keys == 0 {
		a.WorstAdmitted = 0
		return a
	}
	a.WorstRatio = float64(a.WorstAdmitted) / float64(a.Bound)
	return a
}

// bound is burst + floor(limit × window / period), saturating at MaxInt64.
func bound(limit, burst int64, period, window time.Duration) int64 {
	hi, lo := bits.Mul64(uint64(limit), uint64(window))
	if hi >= uint64(period) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(period))
	if q > uint64(math.MaxInt64-burst) {
		return math.MaxInt64
	}
	return burst + int64(q)
}

// distributionPercentiles are HDR's percentile-distribution points with 5
// ticks per half distance: 0, 10, ..., 50, 55, ..., 75, 77.5, ... up to
// 99.999.
var distributionPercentiles = func() []float64 {
	const ticks, top = 5, 99.999
	var ps []float64
	for k := 0; ; k++ {
		base := 100 * (1 - math.Pow(2, -float64(k)))
		step := 100 * math.Pow(2, -float64(k+1)) / ticks
		for j := 0; j < ticks; j++ {
			p := base + float64(j)*step
			if p >= top {
				return append(ps, top)
			}
			ps = append(ps, p)
		}
	}
}()
