package activity

import "time"

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
	Interval time.Duration
	Series   *Series
	Hot      *HotKeys
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
	return &Recorder{Interval: cfg.Interval, Series: NewSeries(cfg.Slots), Hot: NewHotKeys(cfg.Capacity, cfg.SampleEvery)}
}
