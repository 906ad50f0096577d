package main

import (
	"fmt"
	"time"
)

// The limit of every key in scenarios a-d: 100 per second, burst 100.
const (
	limitN      = 100
	limitBurst  = 100
	limitPeriod = time.Second
	callTimeout = 2 * time.Second
	// Scenario e: the filled keys' limit, long enough that none expires
	// while the memory is read: a token bucket's key taken once is stored
	// for memPeriod/limitN (864 s), past a fill of 10M keys on a busy
	// machine (about 55 s on 2 shared cores; 36 s with a period of an hour
	// was not).
	memPeriod = 24 * time.Hour
	// memBatch is the number of keys per call (Sluice) or pipeline (Redis)
	// when filling scenario e; memFillers the goroutines that do it.
	memBatch   = 1000
	memFillers = 4
	// fullKeysE is the key count scenario e's target is stated for.
	fullKeysE = 10_000_000
)

// scenario is one load shape, run against every system with the same engine
// settings.
type scenario struct {
	ID      string
	Title   string
	Short   string // for the headline table
	Workers int
	Keys    int
	Hot     bool
	Rate    float64 // > 0: open loop at this many checks/s
	// Group is the scenario whose --grants setting applies (h for the
	// points of the throughput-vs-callers curve); "" means ID.
	Group string
	// Duration overrides --duration when set (the curve's points).
	Duration time.Duration
	// RLS: the checks are Envoy RLS v3 ShouldRateLimit calls, against
	// Sluice and envoyproxy/ratelimit + Redis (rls.go).
	RLS bool
}

// runs reports whether sys takes part in the scenario: the RLS scenarios
// compare Sluice (3 nodes called in turn or at each descriptor's owner,
// and 1 node as the reference's one process) with envoyproxy/ratelimit (and the echo's RLS), the others Sluice with
// Redis + Lua, Gubernator and the echo.
func (sc scenario) runs(sys string) bool {
	if sc.RLS {
		return sys == "sluice" || sys == "sluice-owner" || sys == "sluice1" || sys == "ratelimit" || sys == "echo"
	}
	return sys != "ratelimit" && sys != "sluice1" && sys != "sluice-owner"
}

// remembers reports whether sys takes part in scenario e (one node's
// memory at 10M keys): Sluice and Redis.
func remembers(sys string) bool { return sys == "sluice" || sys == "redis" }

var scenarios = []scenario{
	{ID: "a", Title: "1,000 keys uniform, 8 callers, closed loop", Short: "1,000 keys, 8 callers",
		Workers: 8, Keys: 1000},
	{ID: "b", Title: "1,000 keys uniform, 64 callers, closed loop", Short: "1,000 keys, 64 callers",
		Workers: 64, Keys: 1000},
	{ID: "c", Title: "one hot key, 64 callers, closed loop", Short: "1 hot key, 64 callers",
		Workers: 64, Keys: 1, Hot: true},
	{ID: "d", Title: "open loop, 100,000 checks/s offered, 1,000 keys, 512 senders", Short: "open loop 100k/s offered",
		Workers: 512, Keys: 1000, Rate: 100_000},
	{ID: "f", Title: "Envoy RLS: 1,000 descriptors uniform, 8 callers, closed loop", Short: "RLS, 1,000 descriptors, 8 callers",
		Workers: 8, Keys: 1000, RLS: true},
	{ID: "g", Title: "Envoy RLS: 1,000 descriptors uniform, 64 callers, closed loop", Short: "RLS, 1,000 descriptors, 64 callers",
		Workers: 64, Keys: 1000, RLS: true},
}

// scenarioIDs are the scenarios --only takes, with "rls" for f and g.
const scenarioIDs = "abcdefgh"

// curveCallers are the callers of scenario h's points: throughput against
// callers, 1,000 keys uniform, closed loop.
var curveCallers = []int{1, 8, 64, 256}

// curvePoint is scenario h's point at callers workers.
func curvePoint(workers int, d time.Duration) scenario {
	return scenario{ID: fmt.Sprintf("h%d", workers), Group: "h", Workers: workers, Keys: 1000, Duration: d,
		Title: fmt.Sprintf("throughput vs callers: 1,000 keys uniform, %d callers, closed loop", workers)}
}

// grantsID is the scenario whose --grants setting applies to sc.
func (sc scenario) grantsID() string {
	if sc.Group != "" {
		return sc.Group
	}
	return sc.ID
}
