package store

import (
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/sluice-rl/sluice/bucket"
)

// shard is one lock stripe: a mutex and one lazily created map per kind of
// state. Fixed, sliding and hits windows have separate maps so that a key
// used with several keeps independent states. Everything is guarded by mu.
type shard struct {
	mu      sync.Mutex
	tokens  map[uint64]bucket.TokenState  // TokenBucket: the hot map
	fixed   map[uint64]bucket.WindowState // FixedWindow
	sliding map[uint64]bucket.WindowState // SlidingWindow
	hits    map[uint64]bucket.WindowState // FixedWindowHits
	logs    map[uint64]logState           // SlidingLog
	leases  map[uint64]bucket.LeaseState  // Concurrency

	// sweepAt is a lower bound of the ExpiresAt of every state in the
	// shard (math.MaxInt64 when there is none): sweeping at now < sweepAt
	// would find nothing. Writes lower it, sweeps recompute it.
	sweepAt int64
}

// shardSize is the size of a shard: exactly one 64-byte cache line, so that
// neighbouring shards never share one (an array of a power of two of them is
// 64-byte aligned by the runtime: power-of-two size classes are aligned to
// their size, and large allocations to pages).
const shardSize = int(unsafe.Sizeof(shard{}))

// Compile-time check that a shard fills exactly one cache line.
var _ [64 - shardSize]struct{}
var _ [shardSize - 64]struct{}

// noteExpiry records that a state of sh expires at exp.
func (sh *shard) noteExpiry(exp int64) {
	if exp < sh.sweepAt {
		sh.sweepAt = exp
	}
}

// logState is a stored sliding log: the entries and the period of the limit
// they were taken under, which LogState.ExpiresAt needs.
type logState struct {
	entries []bucket.LogEntry
	period  int64
}

// expiresAt is the instant from which the log equals the zero state.
func (st logState) expiresAt() int64 {
	return bucket.LogState{Entries: st.entries}.ExpiresAt(st.period)
}

// Zero-state tests: a state for which these report true carries no
// information at now (it behaves exactly like the zero state from now on), so
// the store does not keep it. Beyond ExpiresAt() <= now, a window with no
// counts and an empty log or lease set are zero: package bucket may return
// such states (rolled to the current window, say) for a read or a deny.

// tokenIsZero reports whether st equals the zero token state at now.
func tokenIsZero(st bucket.TokenState, now int64) bool { return st.ExpiresAt() <= now }

// windowIsZero reports whether st equals the zero window state at now.
func windowIsZero(st bucket.WindowState, now int64) bool {
	return st.ExpiresAt() <= now || (st.Cur == 0 && st.Prev == 0)
}

// isZero reports whether st equals the zero log state at now.
func (st logState) isZero(now int64) bool {
	return len(st.entries) == 0 || st.expiresAt() <= now
}

// leasesIsZero reports whether st equals the zero lease state at now.
func leasesIsZero(st bucket.LeaseState, now int64) bool {
	return len(st.Leases) == 0 || st.ExpiresAt() <= now
}

// The take functions below share one shape. With old the stored state (ok
// whether there is one) and next the algorithm's result:
//   - an expired stored state is passed to the algorithm as the zero state;
//   - on an error nothing changes;
//   - a next that equals the zero state is not kept (an existing key is
//     deleted);
//   - an existing key otherwise stores next;
//   - a new key is inserted only for an allowed take of cost > 0 (never for
//     a read or a deny) and only if the memory cap admits it.
// Unlocking is deferred so that a panic in an algorithm (a Limit that did
// not pass Validate) cannot leave a shard locked.

// takeToken is Take for token buckets. For an existing key it does not
// allocate.
func (s *Store) takeToken(sh *shard, key uint64, l bucket.Limit, now, cost int64, as Use) (bucket.Result, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return s.takeTokenLocked(sh, key, l, now, cost, as)
}

// takeTokenLocked is takeToken with sh.mu held.
func (s *Store) takeTokenLocked(sh *shard, key uint64, l bucket.Limit, now, cost int64, as Use) (bucket.Result, error) {
	old, ok := sh.tokens[key]
	in := old
	if ok && tokenIsZero(old, now) {
		in = bucket.TokenState{}
	}
	if ok && l.Limit > 0 {
		var clamped bool
		if in, clamped = bucket.ClampToken(in, l, now); clamped {
			s.clamped.Add(1) // next != old below: the clamped state is stored
		}
	}
	debt, set := s.debtLocked(sh, key, now)
	next, nd, res, err := bucket.TakeTokenDebt(in, debt, l, now, cost)
	if err != nil {
		return bucket.Result{}, err
	}
	switch {
	case tokenIsZero(next, now):
		if ok {
			delete(sh.tokens, key)
			s.drop(sh, key, tokenEntryBytes)
		}
	case ok:
		if next != old {
			sh.tokens[key] = next
			s.noteToken(sh, key, next)
		}
		s.touch(key, now, as)
	case !res.Allowed || cost == 0: // a new key is never inserted by a read or a deny
	default:
		client, err := s.reserve(sh, key, now, tokenEntryBytes, as)
		if err != nil {
			return bucket.Result{}, err
		}
		if sh.tokens == nil {
			sh.tokens = make(map[uint64]bucket.TokenState)
		}
		sh.tokens[key] = next
		s.noteToken(sh, key, next)
		s.track(key, now, as.Kind, client)
	}
	s.setDebtLocked(sh, key, set, debt, nd, now)
	return res, nil
}

// takeWindow is Take for fixed, sliding and hits windows; m points at the
// shard's map for the algorithm and take is the algorithm. countsDenied
// says that a denied take changes the state (fixed_window_hits), so that it
// inserts a new key like an allowed one.
func (s *Store) takeWindow(sh *shard, m *map[uint64]bucket.WindowState,
	take func(bucket.WindowState, bucket.Limit, int64, int64) (bucket.WindowState, bucket.Result, error),
	key uint64, l bucket.Limit, now, cost int64, countsDenied bool, as Use) (bucket.Result, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return s.takeWindowLocked(sh, m, take, key, l, now, cost, countsDenied, as)
}

// takeWindowLocked is takeWindow with sh.mu held.
func (s *Store) takeWindowLocked(sh *shard, m *map[uint64]bucket.WindowState,
	take func(bucket.WindowState, bucket.Limit, int64, int64) (bucket.WindowState, bucket.Result, error),
	key uint64, l bucket.Limit, now, cost int64, countsDenied bool, as Use) (bucket.Result, error) {
	old, ok := (*m)[key]
	in := old
	if ok && old.ExpiresAt() <= now {
		in = bucket.WindowState{}
	}
	next, res, err := take(in, l, now, cost)
	switch {
	case err != nil:
		return bucket.Result{}, err
	case windowIsZero(next, now):
		if ok {
			delete(*m, key)
			s.drop(sh, key, windowEntryBytes)
		}
	case ok:
		if next != old {
			(*m)[key] = next
			s.noteWrite(sh, key, next.ExpiresAt())
		}
		s.touch(key, now, as)
	case cost == 0 || !res.Allowed && !countsDenied:
	default:
		client, err := s.reserve(sh, key, now, windowEntryBytes, as)
		if err != nil {
			return bucket.Result{}, err
		}
		if *m == nil {
			*m = make(map[uint64]bucket.WindowState)
		}
		(*m)[key] = next
		s.noteWrite(sh, key, next.ExpiresAt())
		s.track(key, now, as.Kind, client)
	}
	return res, nil
}

// takeLog is Take for sliding logs.
func (s *Store) takeLog(sh *shard, key uint64, l bucket.Limit, now, cost int64, as Use) (bucket.Result, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return s.takeLogLocked(sh, key, l, now, cost, as)
}

// takeLogLocked is takeLog with sh.mu held.
func (s *Store) takeLogLocked(sh *shard, key uint64, l bucket.Limit, now, cost int64, as Use) (bucket.Result, error) {
	old, ok := sh.logs[key]
	in := bucket.LogState{Entries: old.entries}
	if ok && old.expiresAt() <= now {
		in.Entries = old.entries[:0] // the zero state, reusing the array
	}
	// TakeLog may reuse in's array: old must not be read after this,
	// except for its capacity (which only the estimate uses).
	oldBytes := logBytes(old.entries)
	next, res, err := bucket.TakeLog(in, l, now, cost)
	if err != nil {
		return bucket.Result{}, err // the state is left unchanged
	}
	st := logState{entries: next.Entries, period: int64(l.Period)}
	switch {
	case st.isZero(now):
		if ok {
			delete(sh.logs, key)
			s.drop(sh, key, oldBytes)
		}
	case ok:
		st.entries = compact(st.entries)
		sh.logs[key] = st
		s.bytes.Add(logBytes(st.entries) - oldBytes)
		s.noteWrite(sh, key, st.expiresAt())
		s.touch(key, now, as)
	case !res.Allowed || cost == 0:
	default:
		st.entries = compact(st.entries)
		client, err := s.reserve(sh, key, now, logBytes(st.entries), as)
		if err != nil {
			return bucket.Result{}, err
		}
		if sh.logs == nil {
			sh.logs = make(map[uint64]logState)
		}
		sh.logs[key] = st
		s.noteWrite(sh, key, st.expiresAt())
		s.track(key, now, as.Kind, client)
	}
	return res, nil
}

// compactMinCap is the capacity under which compact leaves slices alone.
const compactMinCap = 32

// compact copies s into a right-sized array when at most a quarter of its
// capacity is used, so that a log or lease set that shrank returns memory.
func compact[T any](s []T) []T {
	if cap(s) > compactMinCap && len(s) <= cap(s)/4 {
		return slices.Clone(s)
	}
	return s
}

// acquire is Acquire on shard sh. With renew set it only renews the live
// lease id (see Store.Renew), reporting ok false when there is none;
// otherwise it generates a new lease ID and ok is the acquire's outcome.
func (s *Store) acquire(sh *shard, key uint64, l bucket.Limit, now, cost int64, ttl time.Duration, renew bool, id LeaseID) (leaseID LeaseID, res bucket.Result, ok bool, err error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old, found := sh.leases[key]
	in := old
	if found && old.ExpiresAt() <= now {
		in.Leases = old.Leases[:0]
	}
	if renew {
		if !holds(in.Leases, id, now) {
			// Nothing to renew: report usage, change nothing (a read
			// may drop lapsed leases, which is lossless).
			cost, id = 0, LeaseID{}
		}
	} else {
		holder := id.Holder
		id = newLeaseID()
		id.Holder = holder
	}
	oldBytes := leaseBytes(old.Leases)
	next, res, err := bucket.Acquire(in, l, now, cost, id.ID, ttl)
	if err != nil {
		return LeaseID{}, bucket.Result{}, false, err // the state is left unchanged
	}
	ok = res.Allowed && cost > 0
	if ok {
		setTag(next.Leases, id)
	}
	switch {
	case leasesIsZero(next, now):
		if found {
			delete(sh.leases, key)
			s.drop(sh, key, oldBytes)
		}
	case found:
		next.Leases = compact(next.Leases)
		sh.leases[key] = next
		s.bytes.Add(leaseBytes(next.Leases) - oldBytes)
		s.noteWrite(sh, key, next.ExpiresAt())
	case !ok:
	default:
		next.Leases = compact(next.Leases)
		if _, err := s.reserve(sh, key, now, leaseBytes(next.Leases), Use{}); err != nil {
			return LeaseID{}, bucket.Result{}, false, err
		}
		if sh.leases == nil {
			sh.leases = make(map[uint64]bucket.LeaseState)
		}
		sh.leases[key] = next
		s.noteWrite(sh, key, next.ExpiresAt())
	}
	if !ok {
		id = LeaseID{}
	}
	return id, res, ok, nil
}

// holds reports whether leases has a live lease with identifier id (ID
// and Tag) bound to id.Holder at now.
func holds(leases []bucket.Lease, id LeaseID, now int64) bool {
	for _, le := range leases {
		if le.ID == id.ID && le.Tag == id.Tag && le.Holder == id.Holder && le.Expires > now {
			return true
		}
	}
	return false
}

// setTag gives the lease of leases with id.ID the tag id.Tag and the
// holder id.Holder.
func setTag(leases []bucket.Lease, id LeaseID) {
	for i := range leases {
		if leases[i].ID == id.ID {
			leases[i].Tag, leases[i].Holder = id.Tag, id.Holder
			return
		}
	}
}

// release is Release on sh.
func (s *Store) release(sh *shard, key uint64, l bucket.Limit, now int64, id LeaseID) (bool, bucket.Result, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old, found := sh.leases[key]
	in := old
	if found && old.ExpiresAt() <= now {
		in.Leases = old.Leases[:0]
	}
	bid := id.ID
	if !holds(in.Leases, id, now) {
		bid = 0 // no such lease, or the tag differs: release nothing, report usage
	}
	oldBytes := leaseBytes(old.Leases)
	next, res, released := bucket.Release(in, l, now, bid)
	if !found {
		return released, res, nil // never insert
	}
	if leasesIsZero(next, now) {
		delete(sh.leases, key)
		s.drop(sh, key, oldBytes)
	} else {
		next.Leases = compact(next.Leases)
		sh.leases[key] = next
		s.bytes.Add(leaseBytes(next.Leases) - oldBytes)
		s.noteWrite(sh, key, next.ExpiresAt())
	}
	return released, res, nil
}
