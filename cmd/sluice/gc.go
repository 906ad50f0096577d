package main

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/node"
)

// The Go runtime settings of `sluice serve` (the process's, so here and not
// in package node, of which a test process holds several).
const (
	// defaultGCPercent is --gc-percent's default: the GC percent (GOGC) of
	// a large heap. A node's heap is mostly its store's maps, which hold no
	// pointers, so a collection costs little beside the memory that Go's
	// default of 100 leaves between collections (up to the live heap again,
	// which the RSS keeps).
	defaultGCPercent = 25
	// gcMinHeadroom is the growth of the heap that the GC percent of
	// --gc-percent always allows between collections (up to Go's 100% of
	// the live heap): a small heap is not collected more often than with
	// Go's default, where a collection's fixed cost would show per check.
	gcMinHeadroom = 64 << 20
	// memoryLimitShare is the share of the container's memory limit that
	// --memory-limit defaults to.
	memoryLimitShare = 0.9
	// gcTuneInterval is how often the GC percent follows the live heap.
	gcTuneInterval = 500 * time.Millisecond
)

// gcPercentFlag is --gc-percent: a percent of at least 1.
type gcPercentFlag struct{ v *int }

func (f gcPercentFlag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.Itoa(*f.v)
}

func (f gcPercentFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not a whole percent: %q", s)
	}
	if n < 1 || n > 100000 {
		return fmt.Errorf("%d is not in 1..100000 (GC off: GOGC=off)", n)
	}
	*f.v = n
	return nil
}

// gcSettings are the runtime settings that serve applies: Percent the GC
// percent of a large heap (0: GOGC from the environment stays in force,
// untouched), MemoryLimit the soft memory limit (-1: GOMEMLIMIT from the
// environment stays in force; 0: none), and where each came from.
type gcSettings struct {
	Percent         int
	PercentFrom     string
	MemoryLimit     int64
	MemoryLimitFrom string
}

// defaultGCSettings are the settings when no flag is given: the
// environment's GOGC and GOMEMLIMIT when set (the runtime applied them at
// start), else defaultGCPercent and memoryLimitShare of the container's
// memory limit (none outside a container).
func defaultGCSettings(lookupEnv func(string) (string, bool), mem node.MemorySource) gcSettings {
	s := gcSettings{Percent: defaultGCPercent, PercentFrom: "default"}
	if v, ok := lookupEnv("GOGC"); ok {
		s.Percent, s.PercentFrom = 0, "GOGC="+v
	}
	if v, ok := lookupEnv("GOMEMLIMIT"); ok {
		s.MemoryLimit, s.MemoryLimitFrom = -1, "GOMEMLIMIT="+v
	} else if c, from := mem.ContainerLimit(); c > 0 {
		s.MemoryLimit = int64(float64(c)*memoryLimitShare) / (1 << 20) * (1 << 20)
		s.MemoryLimitFrom = fmt.Sprintf("%.0f%% of the %s", memoryLimitShare*100, from)
	} else {
		s.MemoryLimitFrom = "no container limit"
	}
	return s
}

// here is the ending of a -h text that says what a default is on this
// host, "" unless show.
func (gcSettings) here(show bool, what string) string {
	if !show {
		return ""
	}
	return "; here " + what
}

// describePercent and describeMemoryLimit describe the settings for -h and
// the start log.
func (s gcSettings) describePercent() string {
	if s.Percent == 0 {
		return s.PercentFrom + ", untouched"
	}
	return fmt.Sprintf("%d (%s)", s.Percent, s.PercentFrom)
}

func (s gcSettings) describeMemoryLimit() string {
	switch s.MemoryLimit {
	case -1:
		return s.MemoryLimitFrom + ", untouched"
	case 0:
		return "none (" + s.MemoryLimitFrom + ")"
	}
	return fmt.Sprintf("%s (%s)", formatSize(s.MemoryLimit), s.MemoryLimitFrom)
}

// applyMemoryLimit sets the soft memory limit unless the environment's is
// to stay.
func (s gcSettings) applyMemoryLimit(set func(int64) int64) {
	switch {
	case s.MemoryLimit < 0:
	case s.MemoryLimit == 0:
		set(math.MaxInt64)
	default:
		set(s.MemoryLimit)
	}
}

// gcPercentFor is the GC percent for a live heap of live bytes with a
// target of target: target, but at least what lets the heap grow by
// gcMinHeadroom, and at most 100 (Go's default) on that account. A target
// of 100 or more is used as is.
func gcPercentFor(target int, live uint64) int {
	if target >= 100 {
		return target
	}
	p := 100
	if live > 0 {
		p = int(min(100, (100*uint64(gcMinHeadroom)+live-1)/live))
	}
	return max(target, p)
}

// tuneGC sets the GC percent for the live heap every interval (and at
// once) until ctx is done: gcPercentFor(target, live). read returns the
// live heap (the heap marked by the last collection) and set sets the GC
// percent (debug.SetGCPercent).
func tuneGC(ctx context.Context, target int, interval time.Duration, read func() uint64, set func(int) int) {
	cur := -1
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if p := gcPercentFor(target, read()); p != cur {
			set(p)
			cur = p
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// liveHeap reads the live heap from runtime/metrics: the heap that the
// last collection found reachable.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// start applies s to this process: the memory limit at once, and the GC
// percent in a goroutine that ends with ctx. The returned func waits for
// that goroutine.
func (s gcSettings) start(ctx context.Context) (wait func()) {
	s.applyMemoryLimit(debug.SetMemoryLimit)
	var wg sync.WaitGroup
	if s.Percent > 0 {
		wg.Go(func() { tuneGC(ctx, s.Percent, gcTuneInterval, liveHeap, debug.SetGCPercent) })
	}
	return wg.Wait
}
