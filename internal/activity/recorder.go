package activity

import (
	"sync/atomic"
	"time"
)

// Config sizes a Recorder. Zero fields take the defaults.
type Config struct {
	// Interval is the length of a Series slot: the caller ticks this often.
	// Default 1s.
	Interval time.Duration
	// Slots is the Series' ring size. Default 300 (5 minutes of seconds).
	Slots int
	// Capacity is the counters of each HotKeys stripe. Default 64.
	Capacity int
	// SampleEvery: HotKeys counts 1 check in SampleEvery. Default 8.
	SampleEvery int
	// Generation is how many ticks a generation of HotKeys lasts (Tick
	// rotates them), so the hot keys cover the last Generation to
	// 2*Generation intervals. Default Slots (5 minutes).
	Generation int
}

// Defaults of Config.
const (
	DefaultInterval    = time.Second
	DefaultSlots       = 300
	DefaultCapacity    = 64
	DefaultSampleEvery = 8
)

// Recorder is a node's activity: the rate Series and the HotKeys.
type Recorder struct {
	Interval   time.Duration
	Generation int // ticks a HotKeys generation lasts
	Series     *Series
	Hot        *HotKeys
	ticks      atomic.Uint64
}

// New returns a Recorder sized by cfg.
func New(cfg Config) *Recorder {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = DefaultCapacity
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = DefaultSampleEvery
	}
	if cfg.Generation <= 0 {
		cfg.Generation = cfg.Slots
	}
	return &Recorder{Interval: cfg.Interval, Generation: cfg.Generation, Series: NewSeries(cfg.Slots),
		Hot: NewHotKeys(cfg.Capacity, cfg.SampleEvery)}
}

// Tick closes an interval of the Series and, every Generation ticks,
// rotates the HotKeys. The caller ticks every Interval.
func (r *Recorder) Tick() {
	r.Series.Tick()
	if r.ticks.Add(1)%uint64(r.Generation) == 0 {
		r.Hot.Rotate()
	}
}
