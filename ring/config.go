package ring

import (
	"errors"
	"fmt"
	"math"
)

// Defaults of DefaultConfig, and the bounds New accepts. The package
// documentation gives the measurements behind the defaults.
const (
	// DefaultPartitionCount is the number of partitions of DefaultConfig, a
	// prime.
	DefaultPartitionCount = 16381
	// DefaultReplicationFactor is the number of virtual nodes per member of
	// DefaultConfig.
	DefaultReplicationFactor = 500
	// DefaultLoad is the bounded-load factor of DefaultConfig.
	DefaultLoad = 1.01

	// MaxPartitionCount is the largest PartitionCount New accepts.
	MaxPartitionCount = 1 << 20
	// MaxReplicationFactor is the largest ReplicationFactor New accepts.
	MaxReplicationFactor = 1 << 12
)

// ErrInvalidConfig is returned by New for a Config that fails validation;
// the message names the offending field.
var ErrInvalidConfig = errors.New("ring: invalid config")

// Config configures how a Ring assigns partitions to members. Every node of a
// cluster must use the same Config: rings built from the same members agree
// on every owner only if their Configs are equal. DefaultConfig() returns the
// defaults; a zero field also means its default.
type Config struct {
	// PartitionCount is the number of partitions keys hash into: a key's
	// partition is key % PartitionCount. Ownership moves a partition at a
	// time, so more partitions give a finer, more even split, at the cost of
	// a larger owner table (4 bytes a partition) and a slower New. A prime is
	// customary, though as keys are already xxhash values any count spreads
	// them evenly. From the number of members to MaxPartitionCount. Default
	// DefaultPartitionCount (16381).
	PartitionCount int
	// ReplicationFactor is the number of virtual nodes each member has on
	// the hash ring. More virtual nodes make the split more even before the
	// load bound steps in (which moves extra partitions on membership
	// changes), at the cost of a slower New. From 2 to MaxReplicationFactor.
	// Default DefaultReplicationFactor (500).
	ReplicationFactor int
	// Load is the bounded-load factor, a finite number greater than 1: no
	// member owns more than ceil(floor(PartitionCount/members) × Load)
	// partitions. A partition whose successor on the ring is full goes to
	// the next virtual node whose member has room (consistent hashing with
	// bounded loads, Mirrokni, Thorup and Zadimoghaddam). Default
	// DefaultLoad (1.01).
	Load float64
}

// DefaultConfig returns the default configuration: 16381 partitions, 500
// virtual nodes per member, load factor 1.01.
func DefaultConfig() Config {
	return Config{
		PartitionCount:    DefaultPartitionCount,
		ReplicationFactor: DefaultReplicationFactor,
		Load:              DefaultLoad,
	}
}

// WithDefaults returns c with zero fields replaced by their defaults.
func (c Config) WithDefaults() Config {
	if c.PartitionCount == 0 {
		c.PartitionCount = DefaultPartitionCount
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = DefaultReplicationFactor
	}
	if c.Load == 0 {
		c.Load = DefaultLoad
	}
	return c
}

// validate checks c (after defaults are applied). Errors wrap
// ErrInvalidConfig and name the offending field. New also checks that there
// are no more members than partitions.
func (c Config) validate() error {
	switch {
	case c.PartitionCount < 1:
		return fmt.Errorf("%w: PartitionCount must be > 0, got %d", ErrInvalidConfig, c.PartitionCount)
	case c.PartitionCount > MaxPartitionCount:
		return fmt.Errorf("%w: PartitionCount must be <= %d, got %d", ErrInvalidConfig, MaxPartitionCount, c.PartitionCount)
	case c.ReplicationFactor < 2:
		// With one virtual node per member, consistent's bounded-load walk
		// (which visits all virtual nodes but one) can miss the only member
		// with room, and it panics outright with a single member.
		return fmt.Errorf("%w: ReplicationFactor must be >= 2, got %d", ErrInvalidConfig, c.ReplicationFactor)
	case c.ReplicationFactor > MaxReplicationFactor:
		return fmt.Errorf("%w: ReplicationFactor must be <= %d, got %d", ErrInvalidConfig, MaxReplicationFactor, c.ReplicationFactor)
	case !(c.Load > 1) || math.IsInf(c.Load, 0):
		// Load <= 1 leaves no room for all partitions (consistent panics).
		return fmt.Errorf("%w: Load must be a finite number > 1, got %v", ErrInvalidConfig, c.Load)
	}
	return nil
}
