package limitertest

import (
	"sync"
	"time"
)

// Epoch is the time a Cluster's clock starts at.
var Epoch = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// Clock is a fake clock: it stands still until Advance moves it. It is safe
// for concurrent use; pass its Now as limiter.Config.Clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (d < 0 is ignored: the limiters'
// time never goes back).
func (c *Clock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
