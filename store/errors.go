package store

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them (or one
// of package bucket's, for errors raised by the algorithms), so test them
// with errors.Is.
var (
	// ErrFull is returned when a new key (or an imported one) is refused
	// because the estimated memory of the store reached Config.MaxBytes
	// and its shard holds no Evictable key to evict. Keys that already
	// have a state keep working.
	ErrFull = errors.New("store: full")
	// ErrClientFull is returned when a new key of a client (Use.Client)
	// is refused because the client has Config.MaxKeysPerClient live keys.
	// Keys that already have a state keep working, for every client.
	// It wraps ErrFull.
	ErrClientFull = fmt.Errorf("%w: client's key cap reached", ErrFull)
	// ErrInvalidConfig is returned by New for a Config that fails
	// validation; the message names the offending field.
	ErrInvalidConfig = errors.New("store: invalid config")
	// ErrWrongAlgorithm is returned when an operation does not apply to the
	// limit's algorithm: Take on a Concurrency limit, Acquire or Release
	// on anything else.
	ErrWrongAlgorithm = errors.New("store: wrong algorithm for operation")
	// ErrInvalidEntry is returned by Import for an Entry that cannot be
	// stored (unknown algorithm, sliding log without a period).
	ErrInvalidEntry = errors.New("store: invalid entry")
)
