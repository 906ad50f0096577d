package bucket

import (
	"testing"
	"time"
)

// The benchmarks advance the clock a little on every take, at a rate a bit
// above the limit, so that in steady state both allows and denies occur. They
// report the fraction allowed as allowed/op.

func BenchmarkTakeToken(b *testing.B) {
	l := Limit{Algorithm: TokenBucket, Limit: 1000, Period: time.Second} // one token per ms
	var s TokenState
	now := t0
	allowed := 0
	b.ReportAllocs()
	for b.Loop() {
		next, res, err := TakeToken(s, l, now, 1)
		if err != nil {
			b.Fatal(err)
		}
		if res.Allowed {
			allowed++
		}
		s = next
		now += int64(700 * time.Microsecond)
	}
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
}

func benchmarkWindow(b *testing.B, take takeFunc[WindowState], alg Algorithm) {
	l := Limit{Algorithm: alg, Limit: 50, Period: 100 * time.Millisecond} // 100 takes per window
	var s WindowState
	now := t0
	allowed := 0
	b.ReportAllocs()
	for b.Loop() {
		next, res, err := take(s, l, now, 1)
		if err != nil {
			b.Fatal(err)
		}
		if res.Allowed {
			allowed++
		}
		s = next
		now += int64(time.Millisecond)
	}
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
}

func BenchmarkTakeFixedWindow(b *testing.B) { benchmarkWindow(b, TakeFixedWindow, FixedWindow) }

func BenchmarkTakeSlidingWindow(b *testing.B) { benchmarkWindow(b, TakeSlidingWindow, SlidingWindow) }

func BenchmarkTakeLog(b *testing.B) {
	l := Limit{Algorithm: SlidingLog, Limit: 1000, Period: time.Second}
	s := LogState{Entries: make([]LogEntry, 0, l.Limit)}
	now := t0
	allowed := 0
	b.ReportAllocs()
	for b.Loop() {
		next, res, err := TakeLog(s, l, now, 1)
		if err != nil {
			b.Fatal(err)
		}
		if res.Allowed {
			allowed++
		}
		s = next
		now += int64(700 * time.Microsecond)
	}
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
}

// BenchmarkAcquireRelease acquires a lease of 20ms every 100µs, against a limit
// of 100, and releases every other lease early (after 15ms): one op is an
// Acquire plus, every other op, a Release.
func BenchmarkAcquireRelease(b *testing.B) {
	l := Limit{Algorithm: Concurrency, Limit: 100}
	s := LeaseState{Leases: make([]Lease, 0, l.Limit)}
	now := t0
	allowed := 0
	var id uint64
	b.ReportAllocs()
	for b.Loop() {
		id++
		next, res, err := Acquire(s, l, now, 1, id, 20*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		if res.Allowed {
			allowed++
		}
		s = next
		if id%2 == 0 && id > 150 {
			s, _, _ = Release(s, l, now, id-150)
		}
		now += int64(100 * time.Microsecond)
	}
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
}
