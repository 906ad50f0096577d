package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"
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
