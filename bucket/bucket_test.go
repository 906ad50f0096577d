package bucket

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// t0 is an instant aligned to every period used in the step tables.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()

// step is one take in a step table, in the style of golang.org/x/time/rate's
// tests: at time t, take cost, and expect the result (or an error wrapping
// err, in which case the state must not change).
type step struct {
	t          int64
	cost       int64
	allowed    bool
	remaining  int64
	resetAfter time.Duration
	retryAfter time.Duration
	err        error
}

// takeFunc is the signature shared by TakeToken, TakeFixedWindow,
// TakeSlidingWindow and TakeLog.
type takeFunc[S any] func(S, Limit, int64, int64) (S, Result, error)

// runSteps feeds steps to take, starting from s, and returns the final state.
// check, if not nil, is called after every step with the new state.
func runSteps[S any](t *testing.T, take takeFunc[S], l Limit, s S, steps []step, check func(i int, s S)) S {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Fatalf("limit %+v: %v", l, err)
	}
	for i, st := range steps {
		next, res, err := take(s, l, st.t, st.cost)
		at := time.Duration(st.t - t0)
		if st.err != nil {
			if !errors.Is(err, st.err) {
				t.Errorf("step %d: t0+%v cost %d: err = %v, want %v", i, at, st.cost, err, st.err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != "cost" {
				t.Errorf("step %d: err = %#v, want a *FieldError naming cost", i, err)
			}
			if res.Allowed {
				t.Errorf("step %d: error with Allowed = true", i)
			}
			continue // the state is unchanged: keep using s
		}
		if err != nil {
			t.Errorf("step %d: t0+%v cost %d: unexpected error %v", i, at, st.cost, err)
			continue
		}
		want := Result{
			Allowed:    st.allowed,
			Limit:      l.Capacity(),
			Remaining:  st.remaining,
			ResetAfter: st.resetAfter,
			RetryAfter: st.retryAfter,
		}
		if res != want {
			t.Errorf("step %d: t0+%v cost %d:\n got %+v\nwant %+v", i, at, st.cost, res, want)
		}
		s = next
		if check != nil {
			check(i, s)
		}
	}
	return s
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		l     Limit
		field string
		err   error
	}{
		{"token", Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second}, "", nil},
		{"token with burst", Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Second, Burst: 50}, "", nil},
		{"zero algorithm", Limit{Limit: 10, Period: time.Second}, "algorithm", ErrUnknownAlgorithm},
		{"algorithm too large", Limit{Algorithm: LastAlgorithm + 1, Limit: 10, Period: time.Second}, "algorithm", ErrUnknownAlgorithm},
		{"zero limit", Limit{Algorithm: FixedWindow, Period: time.Second}, "limit", ErrInvalidLimit},
		{"limit too large", Limit{Algorithm: FixedWindow, Limit: MaxLimit + 1, Period: time.Second}, "limit", ErrInvalidLimit},
		{"max limit", Limit{Algorithm: FixedWindow, Limit: MaxLimit, Period: MaxPeriod}, "", nil},
		{"sliding log too large", Limit{Algorithm: SlidingLog, Limit: MaxSlidingLogLimit + 1, Period: time.Second}, "limit", ErrInvalidLimit},
		{"sliding log max", Limit{Algorithm: SlidingLog, Limit: MaxSlidingLogLimit, Period: time.Second}, "", nil},
		{"zero period", Limit{Algorithm: SlidingWindow, Limit: 1}, "period", ErrInvalidLimit},
		{"period too long", Limit{Algorithm: SlidingWindow, Limit: 1, Period: MaxPeriod + 1}, "period", ErrInvalidLimit},
		{"concurrency needs no period", Limit{Algorithm: Concurrency, Limit: 5}, "", nil},
		{"concurrency negative period", Limit{Algorithm: Concurrency, Limit: 5, Period: -1}, "period", ErrInvalidLimit},
		{"negative burst", Limit{Algorithm: TokenBucket, Limit: 1, Period: time.Second, Burst: -1}, "burst", ErrInvalidLimit},
		{"burst too large", Limit{Algorithm: TokenBucket, Limit: 1, Period: time.Second, Burst: MaxLimit + 1}, "burst", ErrInvalidLimit},
		{"burst x interval too long", Limit{Algorithm: TokenBucket, Limit: 1, Period: MaxPeriod, Burst: 101}, "burst", ErrInvalidLimit},
		{"burst x interval overflows", Limit{Algorithm: TokenBucket, Limit: 1, Period: MaxPeriod, Burst: MaxLimit}, "burst", ErrInvalidLimit},
		{"burst x interval at the bound", Limit{Algorithm: TokenBucket, Limit: 1, Period: MaxPeriod, Burst: 100}, "", nil},
	}
	for _, tt := range tests {
		err := tt.l.Validate()
		if tt.err == nil {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.Is(err, tt.err) || !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("%s: Validate() = %#v, want a *FieldError naming %q wrapping %v", tt.name, err, tt.field, tt.err)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for _, a := range []Algorithm{TokenBucket, SlidingWindow, FixedWindow, SlidingLog, Concurrency, FixedWindowHits} {
		got, err := ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", a.String(), got, err, a)
		}
	}
	if got, err := ParseAlgorithm(""); err != nil || got != TokenBucket {
		t.Errorf(`ParseAlgorithm("") = %v, %v; want token_bucket`, got, err)
	}
	if _, err := ParseAlgorithm("leaky_bucket"); !errors.Is(err, ErrUnknownAlgorithm) {
		t.Errorf("ParseAlgorithm(leaky_bucket) err = %v, want ErrUnknownAlgorithm", err)
	}
	if got := Algorithm(0).String(); got != "algorithm(0)" {
		t.Errorf("Algorithm(0).String() = %q", got)
	}
}

func TestCapacityAndInterval(t *testing.T) {
	tests := []struct {
		l        Limit
		capacity int64
		interval int64
	}{
		{Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Hour}, 10, int64(6 * time.Minute)},
		{Limit{Algorithm: TokenBucket, Limit: 10, Period: time.Hour, Burst: 3}, 3, int64(6 * time.Minute)},
		{Limit{Algorithm: TokenBucket, Limit: 3, Period: 10}, 3, 4}, // 10/3 rounds up
		{Limit{Algorithm: TokenBucket, Limit: 1000, Period: 10}, 1000, 1},
		{Limit{Algorithm: FixedWindow, Limit: 10, Period: time.Hour, Burst: 3}, 10, int64(6 * time.Minute)},
	}
	for i, tt := range tests {
		if got := tt.l.Capacity(); got != tt.capacity {
			t.Errorf("%d: Capacity() = %d, want %d", i, got, tt.capacity)
		}
		if got := tt.l.interval(); got != tt.interval {
			t.Errorf("%d: interval() = %d, want %d", i, got, tt.interval)
		}
	}
}

// TestLimitLowered: a state written under a higher limit stays usable: reads
// are allowed, Remaining is never negative and RetryAfter stays exact.
func TestLimitLowered(t *testing.T) {
	const p = int64(time.Minute)
	check := func(name string, res Result, err error, wantAllowed bool) {
		t.Helper()
		if err != nil || res.Allowed != wantAllowed || res.Remaining != 0 {
			t.Errorf("%s: %+v %v, want allowed=%v with Remaining 0", name, res, err, wantAllowed)
		}
	}
	fixed := Limit{Algorithm: FixedWindow, Limit: 5, Period: time.Minute}
	ws := WindowState{Start: t0, Expires: t0 + p, Cur: 8}
	_, res, err := TakeFixedWindow(ws, fixed, t0+1, 0)
	check("fixed read", res, err, true)
	_, res, err = TakeFixedWindow(ws, fixed, t0+1, 5)
	check("fixed take", res, err, false)

	sliding := Limit{Algorithm: SlidingWindow, Limit: 5, Period: time.Minute}
	ws = WindowState{Start: t0, Expires: t0 + 2*p, Prev: 9, Cur: 8}
	_, res, err = TakeSlidingWindow(ws, sliding, t0+1, 0)
	check("sliding read", res, err, true)
	next, res, err := TakeSlidingWindow(ws, sliding, t0+1, 5)
	check("sliding take", res, err, false)
	if _, res2, _ := TakeSlidingWindow(next, sliding, t0+1+int64(res.RetryAfter), 5); !res2.Allowed {
		t.Errorf("sliding: denied at now+RetryAfter: %+v", res2)
	}

	token := Limit{Algorithm: TokenBucket, Limit: 5, Period: time.Minute}
	ts := TokenState{TAT: t0 + 10*p}
	_, res, err = TakeToken(ts, token, t0, 0)
	check("token read", res, err, true)
	_, res, err = TakeToken(ts, token, t0, 1)
	check("token take", res, err, false)
	if _, res2, _ := TakeToken(ts, token, t0+int64(res.RetryAfter), 1); !res2.Allowed {
		t.Errorf("token: denied at now+RetryAfter: %+v", res2)
	}

	logL := Limit{Algorithm: SlidingLog, Limit: 2, Period: time.Minute}
	ls := LogState{Entries: []LogEntry{{t0, 2}, {t0 + 1, 3}}}
	_, res, err = TakeLog(ls, logL, t0+2, 0)
	check("log read", res, err, true)
	_, res, err = TakeLog(ls, logL, t0+2, 1)
	check("log take", res, err, false)
	if res.RetryAfter != time.Duration(p-1) {
		t.Errorf("log: RetryAfter %v, want %v", res.RetryAfter, time.Duration(p-1))
	}

	conc := Limit{Algorithm: Concurrency, Limit: 2}
	cs := LeaseState{Leases: []Lease{{ID: 1, Cost: 2, Expires: t0 + 10}, {ID: 2, Cost: 3, Expires: t0 + 20}}}
	_, res, err = Acquire(cs, conc, t0, 0, 3, 0)
	check("concurrency read", res, err, true)
	_, res, err = Acquire(LeaseState{Leases: slices.Clone(cs.Leases)}, conc, t0, 1, 3, time.Second)
	check("concurrency acquire", res, err, false)
	if res.RetryAfter != 20 {
		t.Errorf("concurrency: RetryAfter %v, want 20ns", res.RetryAfter)
	}
}
