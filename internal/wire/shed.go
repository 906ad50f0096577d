package wire

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// DefaultShedShare is the share of the Go memory limit above which new
// work is refused.
const DefaultShedShare = 0.85

// ErrShed wraps every invalid ShedConfig.
var ErrShed = errors.New("wire: invalid memory shedding")

// ShedConfig configures a Shedder.
type ShedConfig struct {
	// Share of the Go memory limit (GOMEMLIMIT, --memory-limit) above
	// which the process refuses new work, in (0, 1]; 0 means
	// DefaultShedShare. Without a memory limit nothing is shed.
	Share float64
	// Interval is how often the memory is read; 0 means 100ms.
	Interval time.Duration
	// Limit returns the memory limit; nil means debug.SetMemoryLimit(-1).
	Limit func() int64
	// Used returns the memory the limit counts; nil means the runtime's
	// (runtime/metrics: all memory mapped by the Go runtime, minus the
	// heap released to the OS).
	Used func() int64
}

// Shedder says whether the process is over its memory threshold, as of its
// last reading (Run reads it every Interval). The nil Shedder is never
// over.
type Shedder struct {
	cfg  ShedConfig
	over atomic.Bool
}

// NewShedder checks cfg.
func NewShedder(cfg ShedConfig) (*Shedder, error) {
	switch {
	case cfg.Share < 0 || cfg.Share > 1 || math.IsNaN(cfg.Share):
		return nil, fmt.Errorf("%w: Share: must be in (0, 1] (0: %v), got %v", ErrShed, DefaultShedShare, cfg.Share)
	case cfg.Interval < 0:
		return nil, fmt.Errorf("%w: Interval: must be >= 0, got %s", ErrShed, cfg.Interval)
	}
	if cfg.Share == 0 {
		cfg.Share = DefaultShedShare
	}
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.Limit == nil {
		cfg.Limit = func() int64 { return debug.SetMemoryLimit(-1) }
	}
	if cfg.Used == nil {
		cfg.Used = runtimeMemory()
	}
	return &Shedder{cfg: cfg}, nil
}

// Over reports whether new work is to be refused.
func (s *Shedder) Over() bool { return s != nil && s.over.Load() }

// Read reads the memory once and sets Over.
func (s *Shedder) Read() {
	lim := s.cfg.Limit()
	if lim <= 0 || lim == math.MaxInt64 {
		s.over.Store(false)
		return
	}
	s.over.Store(float64(s.cfg.Used()) > s.cfg.Share*float64(lim))
}

// Run reads the memory every Interval until ctx ends.
func (s *Shedder) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.Read()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runtimeMemory reads what the Go memory limit counts.
func runtimeMemory() func() int64 {
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	return func() int64 {
		metrics.Read(samples)
		return int64(samples[0].Value.Uint64() - samples[1].Value.Uint64())
	}
}
