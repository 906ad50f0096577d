package bench

import "context"

// Target is a rate limiter under test: the Sluice client, Redis + Lua, or a
// bare gRPC echo. Every key gets the limit the Target was built with.
//
// Check must be safe for concurrent use by many goroutines.
type Target interface {
	// Check spends one unit of each key in keys (one check per key, all in
	// one call when len(keys) > 1) and sets allowed[i] to whether keys[i]
	// was admitted. len(allowed) == len(keys). An error fails every key of
	// the call; they then count as errors, neither allowed nor denied.
	Check(ctx context.Context, keys []string, allowed []bool) error
	// Close releases the Target's connections.
	Close() error
}
