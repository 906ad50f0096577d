package store

import (
	"fmt"
	"math/bits"
)

// Bounds on Config.Shards.
const (
	// DefaultShards is the number of shards of DefaultConfig.
	DefaultShards = 4096
	// MaxShards is the largest number of shards New accepts.
	MaxShards = 1 << 20
)

// Config configures a Store. Presets/defaults: DefaultConfig().
type Config struct {
	// Shards is the number of lock stripes, a power of two (default 4096).
	// 0 means DefaultShards.
	Shards int
	// MaxBytes caps the estimated memory of stored states; 0 means no cap.
	// When reached, a new key evicts expired states, then live Evictable
	// keys, least recently used first, of its shard; with none left it is
	// refused with ErrFull (see the package doc). See Stats.Bytes for what
	// the estimate covers.
	MaxBytes int64
	// MaxKeysPerClient caps the live keys each client creates (Use.Client,
	// counted from a key's creation until its states are gone: deleted,
	// expired or evicted); a new key of a client at the cap is refused
	// with ErrClientFull. 0 means no cap; keys of no client are never
	// capped.
	MaxKeysPerClient int64
	// TrackChanges keeps a log of the keys written since the last
	// ExportChanged, for replicating them (see changes.go). Off, writes
	// cost nothing extra.
	TrackChanges bool
	// MaxChanges bounds that log: the most keys it holds across all
	// shards (default DefaultMaxChanges). A shard whose share fills up
	// exports all its keys at the next ExportChanged instead.
	MaxChanges int
}

// DefaultMaxChanges is Config.MaxChanges when 0: 256Ki keys, 2 MiB.
const DefaultMaxChanges = 1 << 18

// DefaultConfig returns the default configuration: 4096 shards, no memory
// cap.
func DefaultConfig() Config {
	return Config{Shards: DefaultShards}
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.MaxChanges == 0 {
		c.MaxChanges = DefaultMaxChanges
	}
	return c
}

// validate checks c (after defaults are applied). Errors wrap
// ErrInvalidConfig and name the offending field.
func (c Config) validate() error {
	switch {
	case c.Shards <= 0:
		return fmt.Errorf("%w: Shards must be > 0, got %d", ErrInvalidConfig, c.Shards)
	case c.Shards > MaxShards:
		return fmt.Errorf("%w: Shards must be <= %d, got %d", ErrInvalidConfig, MaxShards, c.Shards)
	case bits.OnesCount(uint(c.Shards)) != 1:
		return fmt.Errorf("%w: Shards must be a power of two, got %d", ErrInvalidConfig, c.Shards)
	case c.MaxChanges < 0:
		return fmt.Errorf("%w: MaxChanges must be >= 0 (0 = default), got %d", ErrInvalidConfig, c.MaxChanges)
	case c.MaxKeysPerClient < 0:
		return fmt.Errorf("%w: MaxKeysPerClient must be >= 0 (0 = no cap), got %d", ErrInvalidConfig, c.MaxKeysPerClient)
	case c.MaxBytes < 0:
		return fmt.Errorf("%w: MaxBytes must be >= 0 (0 = no cap), got %d", ErrInvalidConfig, c.MaxBytes)
	}
	return nil
}
