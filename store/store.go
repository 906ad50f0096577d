package store

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// Store maps 64-bit key hashes to limit states. It is safe for concurrent
// use; create it with New.
type Store struct {
	shards   []shard
	shift    uint // 64 - log2(len(shards)): shard index = mix(key) >> shift
	maxBytes int64
	// changes[i] is the change log of shards[i], guarded by its lock; nil
	// unless Config.TrackChanges (see changes.go).
	changes []changeLog
	// resv[i] holds the reservations of shards[i]'s keys, guarded by its
	// lock (see reserve.go).
	resv       []map[uint64]*resvSet
	maxChanges int // per shard
	// meta[i] maps the evictable keys and the clients' keys of shards[i]
	// to their last use and creator, guarded by its lock; nil unless
	// Config.MaxBytes or MaxKeysPerClient (see evict.go).
	meta         []map[uint64]keyMeta
	clients      clientKeys
	maxPerClient int64

	// Counters, on their own cache line: they change only when a key is
	// inserted, removed or resized, never on the hot path of an existing
	// token key.
	_       [64]byte
	keys    atomic.Int64
	bytes   atomic.Int64
	refused atomic.Uint64
	// evictedExpired and evictedLRU count the states dropped to admit a
	// new key over the cap: expired ones, and live evictable ones.
	evictedExpired atomic.Uint64
	evictedLRU     atomic.Uint64
	clientRefused  atomic.Uint64
	// clamped counts token states found beyond their limit's horizon
	// (see bucket.ClampToken).
	clamped atomic.Uint64
	_       [64]byte
}

// New returns an empty store configured by cfg. A zero Shards means
// DefaultShards. Errors wrap ErrInvalidConfig and name the field.
func New(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		shards:   make([]shard, cfg.Shards),
		shift:    uint(64 - bits.TrailingZeros(uint(cfg.Shards))),
		maxBytes: cfg.MaxBytes,

		maxPerClient: cfg.MaxKeysPerClient,
		resv:         make([]map[uint64]*resvSet, cfg.Shards),
	}
	for i := range s.shards {
		s.shards[i].sweepAt = math.MaxInt64
	}
	if cfg.MaxBytes > 0 || cfg.MaxKeysPerClient > 0 {
		s.meta = make([]map[uint64]keyMeta, cfg.Shards)
	}
	if cfg.TrackChanges {
		s.changes = make([]changeLog, cfg.Shards)
		s.maxChanges = max(16, cfg.MaxChanges/cfg.Shards)
	}
	return s, nil
}

// mixMul is 2^64/φ, the Fibonacci-hashing multiplier: the high bits of
// key*mixMul depend on all bits of key, so even a weak caller hash (or
// sequential test keys) spreads evenly over the shards.
const mixMul = 0x9E3779B97F4A7C15

// shardIndex returns the index of the shard that owns key.
func (s *Store) shardIndex(key uint64) uint64 {
	// With one shard the shift is 64, which Go defines to yield 0.
	return (key * mixMul) >> s.shift
}

// shardOf returns the shard that owns key.
func (s *Store) shardOf(key uint64) *shard {
	return &s.shards[s.shardIndex(key)]
}

// Take applies l.Algorithm (TokenBucket, FixedWindow, SlidingWindow,
// SlidingLog, FixedWindowHits) to the state of key at time now (unix ns),
// spending cost units.
// key is a 64-bit hash computed by the caller (identity of key+limit); each
// algorithm has its own state for a given key.
//
// A cost of 0 reads the state and never inserts a key; neither does a denied
// take (except of FixedWindowHits, whose denied hits count) or an error. An expired stored state is treated exactly like an
// absent one. A take that needs to insert a new key while the store is at
// Config.MaxBytes fails with an error wrapping ErrFull (and a zero Result).
// Concurrency limits are ErrWrongAlgorithm: use Acquire and Release.
// Errors of the algorithm (negative cost, cost above capacity) are passed
// through from package bucket. As for package bucket, l must have passed
// l.Validate(): the store does not check it again on every take.
func (s *Store) Take(key uint64, l bucket.Limit, now, cost int64) (bucket.Result, error) {
	return s.TakeAs(key, l, now, cost, Use{})
}

// TakeAs is Take for a key used as as says: an Evictable key's use is
// recorded, and it may be evicted when the store is full; a new key of
// as.Client counts against Config.MaxKeysPerClient (see the package doc).
func (s *Store) TakeAs(key uint64, l bucket.Limit, now, cost int64, as Use) (bucket.Result, error) {
	switch l.Algorithm {
	case bucket.TokenBucket:
		if l.Calendar == bucket.NoCalendar {
			return s.takeToken(s.shardOf(key), key, l, now, cost, as)
		}
		// A quota: a fixed window of calendar periods (bucket.Limit.Calendar).
		sh := s.shardOf(key)
		return s.takeWindow(sh, &sh.fixed, bucket.TakeFixedWindow, key, l, now, cost, false, as)
	case bucket.FixedWindow:
		sh := s.shardOf(key)
		return s.takeWindow(sh, &sh.fixed, bucket.TakeFixedWindow, key, l, now, cost, false, as)
	case bucket.SlidingWindow:
		sh := s.shardOf(key)
		return s.takeWindow(sh, &sh.sliding, bucket.TakeSlidingWindow, key, l, now, cost, false, as)
	case bucket.FixedWindowHits:
		sh := s.shardOf(key)
		return s.takeWindow(sh, &sh.hits, bucket.TakeFixedWindowHits, key, l, now, cost, true, as)
	case bucket.SlidingLog:
		return s.takeLog(s.shardOf(key), key, l, now, cost, as)
	case bucket.Concurrency:
		return bucket.Result{}, fmt.Errorf("%w: Take on a concurrency limit, use Acquire/Release", ErrWrongAlgorithm)
	default:
		return bucket.Result{}, fmt.Errorf("%w: %v", bucket.ErrUnknownAlgorithm, l.Algorithm)
	}
}

// Acquire takes a lease of cost units on the Concurrency limit l for key,
// lasting ttl unless released first. On success it returns the lease's ID:
// 128 random bits (see LeaseID). A cost of 0 reads usage and returns the
// zero ID, as does a denied acquire (res.Allowed false); neither inserts a
// key. A new key at Config.MaxBytes fails with ErrFull.
func (s *Store) Acquire(key uint64, l bucket.Limit, now, cost int64, ttl time.Duration) (leaseID LeaseID, res bucket.Result, err error) {
	return s.AcquireFor(key, l, now, cost, ttl, 0)
}

// AcquireFor is Acquire for a lease bound to holder (see LeaseID.Holder;
// 0 binds it to none): the returned ID has Holder set, and only an ID
// with the same Holder releases or renews the lease.
//
// Lease sets are Pinned: a live lease is never evicted (its TTL bounds it).
func (s *Store) AcquireFor(key uint64, l bucket.Limit, now, cost int64, ttl time.Duration, holder uint64) (leaseID LeaseID, res bucket.Result, err error) {
	if l.Algorithm != bucket.Concurrency {
		return LeaseID{}, bucket.Result{}, fmt.Errorf("%w: Acquire on a %v limit, use Take", ErrWrongAlgorithm, l.Algorithm)
	}
	leaseID, res, _, err = s.acquire(s.shardOf(key), key, l, now, cost, ttl, false, LeaseID{Holder: holder})
	return leaseID, res, err
}

// Renew replaces the live lease leaseID of key by one of cost units lasting
// ttl from now (a renewal may extend, shorten, grow or shrink the lease; its
// own current cost does not count against it). It reports renewed false,
// changing nothing, when the lease is unknown or has lapsed (the caller then
// needs a new Acquire) or when the new cost does not fit; res reports the
// usage after the call. It never inserts a key. A cost of 0 only reads usage.
// An ID whose Tag or Holder does not match the lease's is unknown.
func (s *Store) Renew(key uint64, l bucket.Limit, now, cost int64, ttl time.Duration, leaseID LeaseID) (renewed bool, res bucket.Result, err error) {
	if l.Algorithm != bucket.Concurrency {
		return false, bucket.Result{}, fmt.Errorf("%w: Renew on a %v limit", ErrWrongAlgorithm, l.Algorithm)
	}
	_, res, renewed, err = s.acquire(s.shardOf(key), key, l, now, cost, ttl, true, leaseID)
	return renewed, res, err
}

// Release returns the lease leaseID of key on the Concurrency limit l. It
// reports false, changing nothing, when the lease is unknown (no lease of
// key has leaseID.ID, or its Tag differs: an ID of another key or a guess;
// or its Holder differs: the lease is bound to another holder)
// or has lapsed. It never inserts a key; res reports the usage after the
// release.
func (s *Store) Release(key uint64, l bucket.Limit, now int64, leaseID LeaseID) (released bool, res bucket.Result, err error) {
	if l.Algorithm != bucket.Concurrency {
		return false, bucket.Result{}, fmt.Errorf("%w: Release on a %v limit", ErrWrongAlgorithm, l.Algorithm)
	}
	return s.release(s.shardOf(key), key, l, now, leaseID)
}

// forget accounts for the removal of one entry of size bytes.
func (s *Store) forget(size int64) {
	s.bytes.Add(-size)
	s.keys.Add(-1)
}
