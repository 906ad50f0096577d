package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/time/rate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bucketTarget is an exact token bucket per key (x/time/rate), starting full.
type bucketTarget struct {
	mu      sync.Mutex
	limit   rate.Limit
	burst   int
	buckets map[string]*rate.Limiter
	calls   atomic.Int64
	maxKeys atomic.Int64 // the largest len(keys) seen
}

func newBucketTarget(limit int64, period time.Duration, burst int64) *bucketTarget {
	if burst == 0 {
		burst = limit
	}
	return &bucketTarget{limit: rate.Limit(float64(limit) / period.Seconds()), burst: int(burst), buckets: map[string]*rate.Limiter{}}
}

func (b *bucketTarget) Check(_ context.Context, keys []string, allowed []bool) error {
	b.calls.Add(1)
	if n := int64(len(keys)); n > b.maxKeys.Load() {
		b.maxKeys.Store(n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, k := range keys {
		l := b.buckets[k]
		if l == nil {
			l = rate.NewLimiter(b.limit, b.burst)
			b.buckets[k] = l
		}
		allowed[i] = l.Allow()
	}
	return nil
}

func (b *bucketTarget) Close() error { return nil }

// funcTarget is a Target made of a function.
type funcTarget func(ctx context.Context, keys []string, allowed []bool) error

func (f funcTarget) Check(ctx context.Context, keys []string, allowed []bool) error {
	return f(ctx, keys, allowed)
}

func (f funcTarget) Close() error { return nil }

// allowAll over-admits: every check is allowed.
var allowAll = funcTarget(func(_ context.Context, _ []string, allowed []bool) error {
	for i := range allowed {
		allowed[i] = true
	}
	return nil
})

// slow answers every call after d (allowed), or when ctx ends.
func slow(d time.Duration) funcTarget {
	return func(ctx context.Context, _ []string, allowed []bool) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i := range allowed {
			allowed[i] = true
		}
		return nil
	}
}

func runOK(t *testing.T, cfg Config, tg Target) Summary {
	t.Helper()
	s, err := Run(context.Background(), cfg, tg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Checks != s.Allowed+s.Denied+s.Errors {
		t.Fatalf("checks %d != allowed %d + denied %d + errors %d", s.Checks, s.Allowed, s.Denied, s.Errors)
	}
	return s
}

// A correct limiter under closed-loop load: counts add up, every key is
// checked and held to the bound, which follows the formula.
func TestClosedLoopCorrectLimiter(t *testing.T) {
	var progress bytes.Buffer
	cfg := Config{Workers: 4, Keys: 20, Limit: 50, Period: time.Second, Burst: 10, Duration: 300 * time.Millisecond, Progress: &progress}
	s := runOK(t, cfg, newBucketTarget(50, time.Second, 10))
	if s.Checks == 0 || s.Errors != 0 || s.Denied == 0 {
		t.Fatalf("checks %d errors %d denied %d: want checks, no errors, some denials", s.Checks, s.Errors, s.Denied)
	}
	if s.Elapsed < cfg.Duration || s.Offered != 0 {
		t.Fatalf("elapsed %v offered %v", s.Elapsed, s.Offered)
	}
	if got := float64(s.Checks) / s.Elapsed.Seconds(); math.Abs(got-s.ChecksPerSec) > 1e-6*got {
		t.Fatalf("checks/s %v, want %v", s.ChecksPerSec, got)
	}
	a := s.Audit
	// Bound = burst + floor(limit * W / period) with W, first send to last
	// answer, about the duration and at most the whole run.
	lo, hi := int64(10+50/4), 10+int64(50*s.Elapsed.Seconds())
	if a.Bound < lo || a.Bound > hi {
		t.Fatalf("bound %d, want %d..%d", a.Bound, lo, hi)
	}
	if a.Keys != 20 || a.OverBound != 0 || a.WorstRatio > 1 || a.WorstAdmitted < 10 || !strings.HasPrefix(a.WorstKey, "bench:") {
		t.Fatalf("audit %+v: want 20 keys, none over bound, the worst admitting its burst at least", a)
	}
	if s.Allowed > int64(a.Keys)*a.Bound {
		t.Fatalf("allowed %d > keys × bound %d", s.Allowed, int64(a.Keys)*a.Bound)
	}
	ps := s.Percentiles
	if len(ps) < 50 || len(ps) > 100 || ps[0].Percentile != 0 || ps[len(ps)-1].Percentile != 99.999 {
		t.Fatalf("%d percentile points from %v to %v", len(ps), ps[0], ps[len(ps)-1])
	}
	for i := 1; i < len(ps); i++ {
		if ps[i].Percentile <= ps[i-1].Percentile || ps[i].Latency < ps[i-1].Latency {
			t.Fatalf("points %d and %d not increasing: %v %v", i-1, i, ps[i-1], ps[i])
		}
	}
	l := s.Latency
	if l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
		t.Fatalf("latency not ordered: %+v", l)
	}
	out := progress.String()
	if !strings.HasPrefix(out, "\r") || !strings.HasSuffix(out, "\n") || !strings.Contains(out, "checks/s") {
		t.Fatalf("progress %q", out)
	}
}

// A limiter that admits everything is caught: every key over the bound.
func TestAuditCatchesOverAdmission(t *testing.T) {
	s := runOK(t, Config{Workers: 2, Keys: 5, KeyPrefix: "k", Limit: 10, Period: time.Second, Duration: 200 * time.Millisecond}, allowAll)
	a := s.Audit
	if a.Keys != 5 || a.OverBound != 5 || a.WorstRatio <= 1 || a.Bound < 11 || a.Bound > 10+int64(10*s.Elapsed.Seconds()) {
		t.Fatalf("audit %+v, elapsed %v: want all 5 keys over a bound of 10 + 10/s", a, s.Elapsed)
	}
	if !strings.HasPrefix(a.WorstKey, "k") || float64(a.WorstAdmitted)/float64(a.Bound) != a.WorstRatio {
		t.Fatalf("audit %+v", a)
	}
	if s.Allowed != s.Checks || a.WorstAdmitted < s.Allowed/5 {
		t.Fatalf("allowed %d of %d, worst key %d", s.Allowed, s.Checks, a.WorstAdmitted)
	}
}

// --hot puts every check on one key; batches carry Batch keys per call.
func TestHotAndBatch(t *testing.T) {
	bt := newBucketTarget(100, time.Second, 0)
	s := runOK(t, Config{Workers: 3, Keys: 50, Hot: true, Batch: 10, Limit: 100, Period: time.Second, Duration: 200 * time.Millisecond}, bt)
	a := s.Audit
	if a.Keys != 1 || a.WorstKey != "bench:0" || a.WorstAdmitted != s.Allowed || a.OverBound != 0 || s.Allowed < 100 {
		t.Fatalf("audit %+v, allowed %d", a, s.Allowed)
	}
	if s.Checks != 10*bt.calls.Load() || bt.maxKeys.Load() != 10 {
		t.Fatalf("checks %d in %d calls of at most %d keys, want 10 per call", s.Checks, bt.calls.Load(), bt.maxKeys.Load())
	}
}

// The open loop offers Rate to a target that keeps up.
func TestOpenLoopOffersRate(t *testing.T) {
	s := runOK(t, Config{Workers: 4, Rate: 2000, Limit: 1e6, Period: time.Second, Duration: 400 * time.Millisecond}, newBucketTarget(1e6, time.Second, 0))
	if s.Offered != 2000 || s.ChecksPerSec < 1000 || s.ChecksPerSec > 2400 {
		t.Fatalf("offered %v, got %.0f checks/s, want about 2000", s.Offered, s.ChecksPerSec)
	}
}

// A target that takes 20ms per call, one worker: the closed loop sees 20ms;
// the open loop at 1000/s counts from each call's due time, so the backlog
// shows as latency far above 20ms (coordinated omission corrected).
func TestOpenLoopCorrectsCoordinatedOmission(t *testing.T) {
	cfg := Config{Workers: 1, Limit: 1e6, Period: time.Second, Duration: 300 * time.Millisecond}
	closed := runOK(t, cfg, slow(20*time.Millisecond))
	if p := closed.Latency.P50; p < 20*time.Millisecond || p > 60*time.Millisecond {
		t.Fatalf("closed loop p50 %v, want about 20ms", p)
	}
	if p := closed.Percentiles[0]; p.Percentile != 0 || p.Latency < 20*time.Millisecond {
		t.Fatalf("closed loop distribution starts at %+v, want the minimum, about 20ms", p)
	}
	cfg.Rate = 1000
	open := runOK(t, cfg, slow(20*time.Millisecond))
	if p := open.Latency.P50; p < 3*closed.Latency.P50 {
		t.Fatalf("open loop p50 %v, want far above the closed loop's %v", p, closed.Latency.P50)
	}
	if open.Latency.Max < 200*time.Millisecond || open.ChecksPerSec > 100 || open.Offered != 1000 {
		t.Fatalf("open loop max %v, %.0f checks/s of %v offered", open.Latency.Max, open.ChecksPerSec, open.Offered)
	}
}

// Errors fail every check of their call and keep the first error's text.
func TestErrorsCounted(t *testing.T) {
	boom := funcTarget(func(context.Context, []string, []bool) error { return errors.New("boom") })
	s := runOK(t, Config{Workers: 2, Batch: 3, Limit: 1, Period: time.Second, Duration: 200 * time.Millisecond}, boom)
	if s.Checks == 0 || s.Errors != s.Checks || s.Allowed+s.Denied != 0 || s.FirstError != "boom" || s.Audit.Keys != 0 {
		t.Fatalf("summary %+v", s)
	}
	var b bytes.Buffer
	if err := s.Format(&b); err != nil || !strings.Contains(b.String(), "first error: boom") {
		t.Fatalf("format %q, %v", b.String(), err)
	}
}

// A call that hangs ends at its deadline, between Timeout and 1.1×Timeout.
func TestTimeoutPerCall(t *testing.T) {
	hang := funcTarget(func(ctx context.Context, _ []string, _ []bool) error { <-ctx.Done(); return ctx.Err() })
	s := runOK(t, Config{Workers: 2, Limit: 1, Period: time.Second, Duration: 200 * time.Millisecond, Timeout: 50 * time.Millisecond}, hang)
	if s.Errors == 0 || !strings.Contains(s.FirstError, "deadline") {
		t.Fatalf("errors %d, first %q", s.Errors, s.FirstError)
	}
	if s.Latency.P50 < 50*time.Millisecond || s.Latency.P50 > 80*time.Millisecond {
		t.Fatalf("p50 %v, want a 50..55ms deadline", s.Latency.P50)
	}
}

// Ending ctx stops the run early with what it has, in both loops: workers
// calling and workers waiting for a due time.
func TestCancelStopsEarly(t *testing.T) {
	for _, rate := range []float64{0, 1} {
		ctx, cancel := context.WithCancel(context.Background())
		var calls atomic.Int64
		tg := funcTarget(func(_ context.Context, _ []string, allowed []bool) error {
			if calls.Add(1) == 100 || rate > 0 {
				cancel()
			}
			allowed[0] = true
			return nil
		})
		start := time.Now()
		s, err := Run(ctx, Config{Workers: 4, Rate: rate, Limit: 1, Period: time.Second, Duration: time.Minute}, tg)
		if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second || s.Checks == 0 || s.Checks != s.Allowed {
			t.Fatalf("rate %v: err %v after %v, summary %+v", rate, err, time.Since(start), s)
		}
	}
}

func TestValidateNamesField(t *testing.T) {
	ok := Config{Limit: 1, Period: time.Second}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for field, mod := range map[string]func(*Config){
		"workers":  func(c *Config) { c.Workers = -1 },
		"keys":     func(c *Config) { c.Keys = -1 },
		"limit":    func(c *Config) { c.Limit = 0 },
		"period":   func(c *Config) { c.Period = 0 },
		"burst":    func(c *Config) { c.Burst = -1 },
		"duration": func(c *Config) { c.Duration = -time.Second },
		"rate":     func(c *Config) { c.Rate = -5 },
		"batch":    func(c *Config) { c.Batch = -1 },
		"timeout":  func(c *Config) { c.Timeout = -1 },
	} {
		c := ok
		mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
		if _, err := Run(context.Background(), c, allowAll); !errors.Is(err, ErrInvalid) {
			t.Errorf("Run with bad %s: %v", field, err)
		}
	}
	if c := (Config{Limit: 1, Period: time.Second, Rate: math.NaN()}); c.Validate() == nil {
		t.Error("rate NaN accepted")
	}
}

func TestBound(t *testing.T) {
	for _, c := range []struct {
		limit, burst   int64
		period, window time.Duration
		want           int64
	}{
		{1100, 1100, time.Second, 0, 1100},
		{100, 100, time.Second, 10*time.Second + 9*time.Millisecond, 1100},
		{5, 5, time.Second, 1999 * time.Millisecond, 14},
		{10, 1, time.Hour, 24 * time.Hour, 241},
		{1e9, 1e9, time.Nanosecond, time.Hour, math.MaxInt64},
	} {
		if got := bound(c.limit, c.burst, c.period, c.window); got != c.want {
			t.Errorf("bound(%d, %d, %v, %v) = %d, want %d", c.limit, c.burst, c.period, c.window, got, c.want)
		}
	}
}

func TestSummaryJSONAndFormat(t *testing.T) {
	s := Summary{Checks: 2000, Allowed: 1103, Denied: 897, Elapsed: 1500 * time.Millisecond, ChecksPerSec: 1333.3,
		Latency:     Latency{P50: 250 * time.Microsecond, P90: time.Millisecond, P99: 2500 * time.Microsecond, P999: 10 * time.Millisecond, Max: 12 * time.Millisecond, Mean: 300 * time.Microsecond},
		Audit:       Audit{Keys: 1000, Bound: 1100, WorstKey: "bench:17", WorstAdmitted: 1103, WorstRatio: 1103.0 / 1100},
		Percentiles: []Point{{0, time.Microsecond}, {50, 250 * time.Microsecond}}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Checks    int64   `json:"checks"`
		ElapsedMS float64 `json:"elapsed_ms"`
		PerSec    float64 `json:"checks_per_sec"`
		Latency   struct {
			P50 float64 `json:"p50_ms"`
			Max float64 `json:"max_ms"`
		} `json:"latency"`
		Audit struct {
			WorstKey  string `json:"worst_key"`
			OverBound *int   `json:"over_bound"`
		} `json:"audit"`
		Percentiles []struct {
			Latency float64 `json:"latency_ms"`
		} `json:"percentiles"`
		FirstError *string `json:"first_error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Checks != 2000 || m.ElapsedMS != 1500 || m.PerSec != 1333.3 || m.Latency.P50 != 0.25 || m.Latency.Max != 12 ||
		m.Audit.WorstKey != "bench:17" || m.Audit.OverBound == nil || len(m.Percentiles) != 2 || m.Percentiles[1].Latency != 0.25 || m.FirstError == nil {
		t.Fatalf("json %s", b)
	}
	var back Summary
	if err := json.Unmarshal(b, &back); err != nil || back.Latency != s.Latency || back.Audit != s.Audit || back.Elapsed != s.Elapsed || len(back.Percentiles) != 2 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	var out bytes.Buffer
	if err := s.Format(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"checks:     2000 in 1.50s\n",
		"checks/s:   1333.3\n",
		"latency:    p50 250µs  p90 1.00ms  p99 2.50ms  p99.9 10.0ms  max 12.0ms",
		"answers:    allowed 1103  denied 897  errors 0\n",
		"accuracy:   worst key bench:17 admitted 1103 of bound 1100 (1.003x), 0 keys over bound",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("format lacks %q:\n%s", want, out.String())
		}
	}
}

// newWorker is one worker of a closed-loop run of cfg at tg, outside Run.
func newWorker(cfg Config, tg Target) *worker {
	cfg = cfg.withDefaults()
	r := &run{cfg: cfg, target: tg, ctx: context.Background(), keys: make([]string, cfg.Keys),
		admitted: make([]atomic.Int64, cfg.Keys), seen: make([]atomic.Bool, cfg.Keys)}
	return &worker{r: r, rng: rand.New(rand.NewPCG(1, 2)), hist: &shardHist{h: newHistogram()}, idx: make([]int, cfg.Batch),
		keys: make([]string, cfg.Batch), allowed: make([]bool, cfg.Batch), call: callCtx{parent: r.ctx, timeout: time.Hour}}
}

var noop = funcTarget(func(_ context.Context, _ []string, allowed []bool) error {
	for i := range allowed {
		allowed[i] = i%2 == 0
	}
	return nil
})

// The engine's own work per check allocates nothing: calls of a worker on a
// target that does nothing.
func TestCheckDoesNotAllocate(t *testing.T) {
	w := newWorker(Config{Keys: 100, Batch: 4, Limit: 1, Period: time.Second}, noop)
	defer w.call.release()
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() { w.check(now, now) }); n != 0 {
		t.Fatalf("%v allocations per call", n)
	}
}

// The engine's own time per call of one key (go test -bench Overhead).
func BenchmarkOverheadPerCall(b *testing.B) {
	w := newWorker(Config{Keys: 1000, Limit: 1, Period: time.Second}, noop)
	defer w.call.release()
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		w.check(now, now)
	}
}
