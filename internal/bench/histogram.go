package bench

import (
	"math"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

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
