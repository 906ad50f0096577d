// Package store keeps the limit state of every active key on one node: a map
// from a 64-bit key hash (computed by the caller from the key and its limit)
// to the state of one of package bucket's algorithms.
//
// The store is built for about ten million active keys per node:
//
//   - Lock striping: keys are spread over Config.Shards shards (a power of
//     two, 4096 by default) by the high bits of a multiplicative mix of the
//     key hash; each shard is a sync.Mutex plus plain Go maps, one per kind
//     of state, created lazily so that an empty store costs only its shard
//     array (64 bytes a shard). No operation holds two shard locks.
//   - Token buckets, the hot and memory-critical case, live in a
//     map[uint64]bucket.TokenState: a 16-byte slot, about 37 bytes per key
//     with the swiss tables' overhead at 10M keys (BenchmarkStore10M). A
//     take of an existing token key does not allocate.
//   - A state is identified by its key and its algorithm: fixed and sliding
//     windows (and every other algorithm) have maps of their own, so a key
//     used with several algorithms has one independent state per algorithm.
//   - Sliding logs keep their limit's period next to the entries, since
//     their expiry depends on it; lease sets need nothing more.
//
// The store is passive: it never reads the clock (time is passed in as unix
// nanoseconds), never touches the network and starts no goroutines or
// timers. Several Stores in one process are fully independent.
//
// # Expiry
//
// By package bucket's contract a state whose ExpiresAt has passed equals the
// zero state, so dropping it loses nothing. The store treats an expired
// stored state exactly like an absent one, so results never depend on when
// sweeps ran; it never stores a state equal to the zero state (after a read,
// say) and never inserts a key for a read, a deny (but for fixed_window_hits,
// whose denied hits count) or an error. Expired states
// hold memory until Sweep (which the owner calls periodically) drops them,
// or a Take finds them, or the memory cap sweeps their shard. Live states are
// evicted only under the memory cap, and only those of Evictable keys.
//
// # Memory cap and eviction
//
// Stats.Bytes is an estimate (see stats.go): per-entry constants measured
// for each map type, plus the capacity of log and lease slices. With
// Config.MaxBytes set, a new key that would push the estimate over the cap
// first sweeps its shard of expired states (counted in
// Stats.EvictedExpired), then evicts live Evictable keys of its shard,
// least recently used first (Stats.EvictedLRU), and is refused with ErrFull
// (counted in Stats.Refused) only when its shard has no Evictable key left.
// Keys that have a state keep working, and may grow (a log gets longer), so
// Bytes can exceed the cap by that growth and by the few inserts racing on
// other shards.
//
// A key's Kind is given by its caller (TakeAs, TakeUpToAs): Pinned
// keys (the default of Take and TakeUpTo; every lease set, so a live lease
// is never evicted) are never evicted while live; Evictable keys (the
// limiter's inline limits, which a client creates at will) are. Evicting a
// live state forgets what it admitted: the key starts afresh, and may
// admit up to its limit again. That is the chosen trade: under memory
// pressure a client's inline keys can be forgotten, least recently used
// first, so that a client creating keys cannot lock every other out of new
// keys; the keys of named policies never are.
//
// LRU is approximated as Redis does: each shard keeps a meta map from its
// Evictable keys to their last use, coarse (now>>30, about a second, a
// uint32), written by every take of the key (allowed, denied or a read).
// An eviction samples 5 of the shard's Evictable keys (Go's map iteration
// starts at a random slot; it reads at most 64 entries to find them) and
// evicts the least recently used (every algorithm's state of that key), up
// to 8 times for one new key. It looks in the new key's shard only, so no
// operation holds two shard locks: with fewer Evictable keys than shards, a
// new key may find none in its shard and be refused while other shards
// hold some. The meta map costs an Evictable key one more slot, estimated
// at 40 bytes (its 8-byte key and 8-byte entry, a 16-byte slot as in the
// token map): 80 bytes for an inline token key instead of 40
// (BenchmarkStore10M/evictable). Pinned keys of no client, and every key
// of a store with neither MaxBytes nor MaxKeysPerClient, cost nothing
// more. A state imported from another node (Import) comes without its
// kind: it is Pinned until its next Evictable take.
//
// # Keys per client
//
// With Config.MaxKeysPerClient set, a new key taken for a client
// (Use.Client, a 64-bit tag of its identity) counts against that client's
// cap from its creation until its states are gone (deleted, refilled,
// swept, evicted), and a new key of a client at the cap is refused with
// ErrClientFull (which wraps ErrFull). The creator is kept in the meta map
// beside the last use, as an index into an interned table of clients, in
// the same 16-byte slot: an Evictable key of a client costs nothing more
// for it, a Pinned key of a client one slot (40 estimated bytes). Using a
// key another client created counts against neither. The clients' table
// has one lock, taken under a shard's lock when a client's key is created
// or removed.
//
// # Handoff
//
// Export, Import and DeleteIf move states between nodes: Export copies the
// live states of the selected keys one shard at a time, Import merges an
// Entry conservatively (the merged state admits no more than either side),
// and DeleteIf drops the keys once they were handed off.
package store
