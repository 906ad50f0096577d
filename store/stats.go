package store

import "github.com/sluice-rl/sluice/bucket"

// Stats is a snapshot of a Store's counters, for metrics.
type Stats struct {
	// Keys is the number of stored states, all algorithms together (a key
	// used with two algorithms counts twice). Expired states that were not
	// swept yet are included.
	Keys int64
	// Bytes is the estimated memory of the stored states (see the
	// estimate functions in stats.go); it excludes the fixed cost of the
	// shards themselves (ShardOverhead bytes each).
	Bytes int64
	// Refused counts new keys refused because of Config.MaxBytes.
	Refused uint64
	// EvictedExpired counts the expired states dropped to admit a new key
	// at Config.MaxBytes (the sweep of its shard; periodic sweeps are not
	// counted), and EvictedLRU the live states of evictable keys evicted
	// for it, least recently used first (see the package doc).
	EvictedExpired, EvictedLRU uint64
	// ClientRefused counts new keys refused because their client had
	// Config.MaxKeysPerClient live keys.
	ClientRefused uint64
	// Clamped counts token states a take found further ahead than the
	// limit's horizon (made under another limit, or corrupt) and read as
	// an empty bucket.
	Clamped uint64
}

// Stats returns the store's counters. It is cheap (seven atomic loads) and
// never blocks. Under concurrent use the values may be momentarily
// inconsistent with each other.
func (s *Store) Stats() Stats {
	return Stats{
		Keys:    s.keys.Load(),
		Bytes:   s.bytes.Load(),
		Refused: s.refused.Load(),
		Clamped: s.clamped.Load(),

		EvictedExpired: s.evictedExpired.Load(),
		EvictedLRU:     s.evictedLRU.Load(),
		ClientRefused:  s.clientRefused.Load(),
	}
}

// Per-entry memory estimates, in bytes, index included. They are estimates:
// a Go map's real cost per entry swings with its load factor (the swiss
// tables run between about 7/16 and 7/8 full as they grow), the allocator
// rounds slices up to size classes, and memory freed by a delete or a resize
// is returned only by the garbage collector. The constants are the average
// heap cost per key measured with 0.6M to 10M keys in a 4096-shard store
// (ranges in brackets; BenchmarkStore10M measures tokens at 10M).
const (
	// tokenEntryBytes: an 8-byte key and an 8-byte TAT per slot [27, 44].
	tokenEntryBytes = 40
	// windowEntryBytes: an 8-byte key and a 32-byte WindowState per slot
	// [60, 101].
	windowEntryBytes = 80
	// logEntryBytes: an 8-byte key and a 32-byte logState (slice header
	// and period) per slot, plus the entries' allocation [76, 117 with one
	// entry].
	logEntryBytes = 80
	// logItemBytes is the cost of one bucket.LogEntry of capacity.
	logItemBytes = 16
	// leaseEntryBytes: an 8-byte key and a 24-byte LeaseState per slot, plus
	// the leases' allocation [75, 108 with one lease].
	leaseEntryBytes = 72
	// leaseItemBytes is the cost of one bucket.Lease of capacity.
	leaseItemBytes = 40
)

// ShardOverhead is the fixed size of one shard (mutex, map headers,
// padding), not counted in Stats.Bytes.
const ShardOverhead = shardSize

// logBytes is the estimated memory of a stored sliding log.
func logBytes(entries []bucket.LogEntry) int64 {
	return logEntryBytes + logItemBytes*int64(cap(entries))
}

// leaseBytes is the estimated memory of a stored lease set.
func leaseBytes(leases []bucket.Lease) int64 {
	return leaseEntryBytes + leaseItemBytes*int64(cap(leases))
}
