package store

import (
	"cmp"
	"slices"

	"github.com/sluice-rl/sluice/bucket"
)

// Entry is one key's state, for handoff between nodes. Only the field that
// matches Algorithm is meaningful.
type Entry struct {
	// Key is the caller's 64-bit key hash.
	Key uint64
	// Algorithm says which of the state fields below holds the state.
	Algorithm bucket.Algorithm
	// Token is the state of a TokenBucket key.
	Token bucket.TokenState
	// Window is the state of a FixedWindow, SlidingWindow or
	// FixedWindowHits key.
	Window bucket.WindowState
	// Log is the state of a SlidingLog key; Export gives a copy the caller
	// owns.
	Log bucket.LogState
	// Leases is the state of a Concurrency key; Export gives a copy the
	// caller owns.
	Leases bucket.LeaseState
	// Period is the period of a SlidingLog key's limit, in nanoseconds,
	// which its expiry depends on. Other algorithms ignore it.
	Period int64
	// Reservations are the key's reservations (see Store.Reserve). The
	// store exports them with the key's state of their algorithm, or, when
	// it has none (it refilled), in an Entry of their own whose state is
	// the zero state; Import merges them with the key's.
	Reservations []bucket.Reservation
}

// ExpiresAt is the instant from which the entry's state equals the zero
// state (0 for an unknown algorithm).
func (e Entry) ExpiresAt() int64 {
	var resv int64
	for _, r := range e.Reservations {
		resv = max(resv, r.Expires)
	}
	return max(resv, e.stateExpiresAt())
}

// stateExpiresAt is ExpiresAt of the state alone.
func (e Entry) stateExpiresAt() int64 {
	switch e.Algorithm {
	case bucket.TokenBucket:
		return e.Token.ExpiresAt()
	case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
		return e.Window.ExpiresAt()
	case bucket.SlidingLog:
		return e.Log.ExpiresAt(e.Period)
	case bucket.Concurrency:
		return e.Leases.ExpiresAt()
	}
	return 0
}

// isZero reports whether the entry's state equals the zero state at now
// and it holds no live reservation.
func (e Entry) isZero(now int64) bool {
	for _, r := range e.Reservations {
		if r.Expires > now {
			return false
		}
	}
	return e.stateIsZero(now)
}

// stateIsZero reports whether the entry's state equals the zero state at now.
func (e Entry) stateIsZero(now int64) bool {
	switch e.Algorithm {
	case bucket.TokenBucket:
		return tokenIsZero(e.Token, now)
	case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
		return windowIsZero(e.Window, now)
	case bucket.SlidingLog:
		return logState{entries: e.Log.Entries, period: e.Period}.isZero(now)
	case bucket.Concurrency:
		return leasesIsZero(e.Leases, now)
	}
	return true
}

// Export calls fn for every live state (ExpiresAt() > now) whose key
// satisfies keep (a nil keep keeps every key), stopping early if fn returns
// false. It holds one shard lock at a time: it copies a shard's matching
// entries under the lock, then calls fn without any lock held, so fn may use
// the Store (e.g. Import into another store, or DeleteIf). keep is called
// with the lock held and must not call the Store. States changed after their
// shard was copied are not seen.
func (s *Store) Export(now int64, keep func(key uint64) bool, fn func(Entry) bool) {
	var buf []Entry
	for i := range s.shards {
		sh := &s.shards[i]
		buf = buf[:0]
		sh.mu.Lock()
		buf = exportShard(buf, sh, now, keep)
		buf = s.exportResvShard(buf, 0, i, now, keep)
		sh.mu.Unlock()
		for _, e := range buf {
			if !fn(e) {
				return
			}
		}
		clear(buf) // drop references to copied slices
	}
}

// exportShard appends copies of the live states of sh that satisfy keep.
func exportShard(buf []Entry, sh *shard, now int64, keep func(uint64) bool) []Entry {
	want := func(k uint64, exp int64) bool { return exp > now && (keep == nil || keep(k)) }
	for k, v := range sh.tokens {
		if want(k, v.ExpiresAt()) {
			buf = append(buf, Entry{Key: k, Algorithm: bucket.TokenBucket, Token: v})
		}
	}
	for k, v := range sh.fixed {
		if want(k, v.ExpiresAt()) {
			buf = append(buf, Entry{Key: k, Algorithm: bucket.FixedWindow, Window: v})
		}
	}
	for k, v := range sh.sliding {
		if want(k, v.ExpiresAt()) {
			buf = append(buf, Entry{Key: k, Algorithm: bucket.SlidingWindow, Window: v})
		}
	}
	for k, v := range sh.hits {
		if want(k, v.ExpiresAt()) {
			buf = append(buf, Entry{Key: k, Algorithm: bucket.FixedWindowHits, Window: v})
		}
	}
	for k, v := range sh.logs {
		if want(k, v.expiresAt()) {
			buf = append(buf, Entry{Key: k, Algorithm: bucket.SlidingLog,
				Log: bucket.LogState{Entries: slices.Clone(v.entries)}, Period: v.period})
		}
	}
	for k, v := range sh.leases {
		if want(k, v.ExpiresAt()) {
			buf = append(buf, Entry{Key: k, Algorithm: bucket.Concurrency,
				Leases: bucket.LeaseState{Leases: slices.Clone(v.Leases)}})
		}
	}
	return buf
}

// Import merges e into the store conservatively: if the key already has a
// live state for e.Algorithm, the result is at least as restrictive as both
// (token: larger TAT; window: same Start -> max counts, later Start wins,
// carrying the earlier current count into the later window's previous count
// when they are consecutive sliding windows; log: union of the entries by
// instant, keeping the larger cost of an instant in both; leases: union by
// ID, keeping the later expiry and larger cost). Importing the same entry
// twice is the same as once. An entry whose state equals the zero state at
// now (expired, say) is ignored: it carries no information. A key that has
// no state yet is subject to the memory cap like a new key (ErrFull);
// merging into an existing one is not. An entry that fails Validate (a
// state this node could not have made at now) is refused with an error
// wrapping ErrInvalidEntry and changes nothing. Slices of e are copied,
// never retained.
func (s *Store) Import(e Entry, now int64) error { return s.put(e, now, true) }

// Replace stores e as key e.Key's state of e.Algorithm, in place of any
// it had (a replica from the key's owner, whose state is the truth). It
// refuses what Import refuses. A zero state (a tombstone: see Reset)
// deletes the key's state of e.Algorithm.
func (s *Store) Replace(e Entry, now int64) error { return s.put(e, now, false) }

// put is Import (merge) or Replace.
func (s *Store) put(e Entry, now int64, merge bool) error {
	if err := e.Validate(now); err != nil {
		return err
	}
	if e.isZero(now) {
		if !merge {
			// A replica's tombstone: its owner reset the key (Reset).
			sh := s.shardOf(e.Key)
			sh.mu.Lock()
			s.deleteAlgorithm(sh, e.Key, e.Algorithm)
			sh.mu.Unlock()
		}
		return nil
	}
	sh := s.shardOf(e.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(e.Reservations) > 0 {
		s.importResv(&e, now)
		if e.stateIsZero(now) {
			if !merge {
				// The owner holds no state but reservations: its
				// state is the truth (a reset, an expiry).
				s.deleteAlgorithm(sh, e.Key, e.Algorithm)
			}
			return nil
		}
	}
	return s.putLocked(sh, e, now, merge)
}

// putLocked is put of a live, valid e with sh, e.Key's shard, locked.
func (s *Store) putLocked(sh *shard, e Entry, now int64, merge bool) error {
	switch e.Algorithm {
	case bucket.TokenBucket:
		old, ok := sh.tokens[e.Key]
		if merge && ok && old.ExpiresAt() > now {
			e.Token = mergeToken(old, e.Token)
		}
		if !ok {
			if _, err := s.reserve(sh, e.Key, now, tokenEntryBytes, Use{}); err != nil {
				return err
			}
			if sh.tokens == nil {
				sh.tokens = make(map[uint64]bucket.TokenState)
			}
		}
		sh.tokens[e.Key] = e.Token
		s.noteToken(sh, e.Key, e.Token)
	case bucket.FixedWindow:
		return s.importWindow(sh, &sh.fixed, e.Key, e.Window, false, now, merge)
	case bucket.SlidingWindow:
		return s.importWindow(sh, &sh.sliding, e.Key, e.Window, true, now, merge)
	case bucket.FixedWindowHits:
		return s.importWindow(sh, &sh.hits, e.Key, e.Window, false, now, merge)
	case bucket.SlidingLog:
		st := logState{entries: liveLog(e.Log.Entries, e.Period, now), period: e.Period}
		old, ok := sh.logs[e.Key]
		if merge && ok && old.expiresAt() > now {
			st.period = max(st.period, old.period)
			st.entries = unionLog(liveLog(old.entries, old.period, now), st.entries)
		}
		if ok {
			s.bytes.Add(logBytes(st.entries) - logBytes(old.entries))
		} else {
			if _, err := s.reserve(sh, e.Key, now, logBytes(st.entries), Use{}); err != nil {
				return err
			}
			if sh.logs == nil {
				sh.logs = make(map[uint64]logState)
			}
		}
		sh.logs[e.Key] = st
		s.noteWrite(sh, e.Key, st.expiresAt())
	case bucket.Concurrency:
		st := bucket.LeaseState{Leases: unionLeases(nil, e.Leases.Leases, now)}
		old, ok := sh.leases[e.Key]
		if merge && ok && old.ExpiresAt() > now {
			st.Leases = unionLeases(old.Leases, st.Leases, now)
		}
		if ok {
			s.bytes.Add(leaseBytes(st.Leases) - leaseBytes(old.Leases))
		} else {
			if _, err := s.reserve(sh, e.Key, now, leaseBytes(st.Leases), Use{}); err != nil {
				return err
			}
			if sh.leases == nil {
				sh.leases = make(map[uint64]bucket.LeaseState)
			}
		}
		sh.leases[e.Key] = st
		s.noteWrite(sh, e.Key, st.ExpiresAt())
	}
	return nil
}

// importWindow is Import for fixed, sliding and hits windows.
func (s *Store) importWindow(sh *shard, m *map[uint64]bucket.WindowState, key uint64, w bucket.WindowState, sliding bool, now int64, merge bool) error {
	old, ok := (*m)[key]
	if merge && ok && old.ExpiresAt() > now {
		w = mergeWindow(old, w, sliding)
	}
	if !ok {
		if _, err := s.reserve(sh, key, now, windowEntryBytes, Use{}); err != nil {
			return err
		}
		if *m == nil {
			*m = make(map[uint64]bucket.WindowState)
		}
	}
	(*m)[key] = w
	s.noteWrite(sh, key, w.ExpiresAt())
	return nil
}

// mergeToken returns the state that has admitted more: the later TAT.
func mergeToken(a, b bucket.TokenState) bucket.TokenState {
	if b.TAT > a.TAT {
		return b
	}
	return a
}

// mergeWindow merges two live window states of one key. Same window: the
// larger counts. Different windows: the later one wins; for a sliding window
// whose later state directly follows the earlier one, the earlier current
// count also bounds the later previous count from below.
func mergeWindow(a, b bucket.WindowState, sliding bool) bucket.WindowState {
	if a.Start == b.Start {
		return bucket.WindowState{
			Start:   a.Start,
			Expires: max(a.Expires, b.Expires),
			Prev:    max(a.Prev, b.Prev),
			Cur:     max(a.Cur, b.Cur),
		}
	}
	if b.Start > a.Start {
		a, b = b, a // a is the later window
	}
	if sliding {
		// A sliding state expires at the end of the window after Start.
		if period := (a.Expires - a.Start) / 2; period > 0 && a.Start-b.Start == period {
			a.Prev = max(a.Prev, b.Cur)
		}
	}
	return a
}

// liveLog returns a new slice with the entries of a log of the given period
// that still count at now (At+period > now), ordered by At.
func liveLog(entries []bucket.LogEntry, period, now int64) []bucket.LogEntry {
	out := make([]bucket.LogEntry, 0, len(entries))
	for _, e := range entries {
		if e.At+period > now {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b bucket.LogEntry) int { return cmp.Compare(a.At, b.At) })
	return out
}

// unionLog merges two logs ordered by At into their union keyed by instant:
// package bucket keeps one entry per instant, so an instant present in both
// (the same admissions seen by both nodes, as after a round trip) is kept
// once with the larger cost. The result admits at least as much as either
// input in every window, and merging a log with itself changes nothing.
func unionLog(a, b []bucket.LogEntry) []bucket.LogEntry {
	out := make([]bucket.LogEntry, 0, len(a)+len(b))
	add := func(e bucket.LogEntry) {
		if n := len(out); n > 0 && out[n-1].At == e.At {
			out[n-1].Cost = max(out[n-1].Cost, e.Cost)
			return
		}
		out = append(out, e)
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j == len(b) || (i < len(a) && a[i].At <= b[j].At) {
			add(a[i])
			i++
		} else {
			add(b[j])
			j++
		}
	}
	return out
}

// unionLeases returns a new slice with the leases of a and b that are live
// at now, one per ID: for an ID in both, the later expiry and the larger
// cost, ordered by Expires.
func unionLeases(a, b []bucket.Lease, now int64) []bucket.Lease {
	out := make([]bucket.Lease, 0, len(a)+len(b))
	at := make(map[uint64]int, len(a)+len(b))
	for _, src := range [2][]bucket.Lease{a, b} {
		for _, l := range src {
			if l.Expires <= now {
				continue
			}
			if i, ok := at[l.ID]; ok {
				out[i].Expires = max(out[i].Expires, l.Expires)
				out[i].Cost = max(out[i].Cost, l.Cost)
				continue
			}
			at[l.ID] = len(out)
			out = append(out, l)
		}
	}
	// Package bucket keeps leases ordered by expiry when it writes them.
	slices.SortStableFunc(out, func(x, y bucket.Lease) int { return cmp.Compare(x.Expires, y.Expires) })
	return out
}
