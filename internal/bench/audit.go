package bench

import (
	"math"
	"math/bits"
	"time"
)

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
