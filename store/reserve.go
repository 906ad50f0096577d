package store

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/sluice-rl/sluice/bucket"
)

// Reservations (reserve and settle) live beside their key's state, in a
// table per shard guarded by the shard's lock (a shard is exactly one
// cache line, so the table is kept outside it, as the change logs are).
// They move with the key: Export, Copy, Extract and ExportChanged give
// them as an Entry of the key's algorithm whose Reservations are set (and
// whose state is the zero state), which Import and Replace merge.

// MaxReservations is the most live reservations (settled ones included,
// until their TTL ends) one key may hold; a Reserve beyond it fails with
// ErrTooManyReservations.
const MaxReservations = 10_000

// Errors of reservations.
var (
	// ErrTooManyReservations is returned by Reserve for a key that holds
	// MaxReservations live reservations.
	ErrTooManyReservations = fmt.Errorf("%w: too many reservations on the key", ErrFull)
	// ErrUnknownReservation is returned by Settle for an ID that names no
	// live reservation of the key (never made, another key's or holder's,
	// or its TTL has ended: it settled at its estimate).
	ErrUnknownReservation = errors.New("store: unknown reservation")
)

// resvSet is one key's reservations and the algorithm of their state.
type resvSet struct {
	alg  bucket.Algorithm
	list []bucket.Reservation
	// first is the earliest Expires in list (0 for none): prune has
	// nothing to drop before it.
	first int64
}

// Estimated memory of reservations (Stats().Bytes and the memory cap
// count it): a key's set (its map slot and header) and each reservation,
// from the sizes of the structs, not measured like the states' (stats.go).
const (
	resvSetBytes  = 96
	resvItemBytes = 88
)

// size is the estimated memory of set; 0 for none.
func (set *resvSet) size() int64 {
	if set == nil {
		return 0
	}
	return resvSetBytes + int64(len(set.list))*resvItemBytes
}

// prune drops the reservations that ended by now, when some may have.
func (set *resvSet) prune(now int64) {
	if set.first > now {
		return
	}
	set.list = bucket.LiveReservations(set.list, now)
	set.first = 0
	for _, r := range set.list {
		if set.first == 0 || r.Expires < set.first {
			set.first = r.Expires
		}
	}
}

// add appends r.
func (set *resvSet) add(r bucket.Reservation) {
	if len(set.list) == 0 || r.Expires < set.first {
		set.first = r.Expires
	}
	set.list = append(set.list, r)
}

// resvOf returns the reservation table of sh (whose lock the caller
// holds), creating it.
func (s *Store) resvOf(key uint64) map[uint64]*resvSet {
	i := s.shardIndex(key)
	if s.resv[i] == nil {
		s.resv[i] = make(map[uint64]*resvSet)
	}
	return s.resv[i]
}

// Settled is the outcome of Settle.
type Settled struct {
	bucket.Settlement
	// Already says the reservation had been settled before: nothing was
	// applied, and the Settlement and Actual are the first settle's.
	Already bool
	// Estimate and Actual are the reservation's.
	Estimate, Actual int64
}

// reservable reports whether l's algorithm can reserve, and the shard map
// its state lives in.
func reservable(sh *shard, l bucket.Limit) (*map[uint64]bucket.WindowState, error) {
	switch {
	case l.Algorithm == bucket.TokenBucket && l.Calendar == bucket.NoCalendar:
		return nil, nil
	case l.Algorithm == bucket.TokenBucket, l.Algorithm == bucket.FixedWindow:
		return &sh.fixed, nil
	case l.Algorithm == bucket.SlidingWindow:
		return &sh.sliding, nil
	case l.Algorithm == bucket.FixedWindowHits:
		return &sh.hits, nil
	}
	return nil, fmt.Errorf("%w: Reserve on a %v limit: only token_bucket, fixed_window, sliding_window and fixed_window_hits", ErrWrongAlgorithm, l.Algorithm)
}

// Reserve takes estimate units of key under l (as Take does) and, when
// allowed, records a reservation of them lasting ttl, bound to holder (0
// for none), whose ID it returns (the zero ID when denied). Settle applies
// the actual cost later; unsettled, the reservation settles at its
// estimate when ttl ends. estimate must be > 0 and ttl in (0,
// bucket.MaxPeriod]; sliding_log and concurrency limits cannot reserve
// (ErrWrongAlgorithm).
func (s *Store) Reserve(key uint64, l bucket.Limit, now, estimate int64, ttl time.Duration, holder uint64) (LeaseID, bucket.Result, error) {
	if estimate <= 0 {
		return LeaseID{}, bucket.Result{}, &bucket.FieldError{Field: "estimate", Reason: "must be > 0", Err: bucket.ErrNegativeCost}
	}
	if ttl <= 0 || ttl > bucket.MaxPeriod {
		return LeaseID{}, bucket.Result{}, &bucket.FieldError{Field: "ttl", Reason: fmt.Sprintf("must be in (0, %v]", bucket.MaxPeriod), Err: bucket.ErrInvalidLimit}
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	m, err := reservable(sh, l)
	if err != nil {
		return LeaseID{}, bucket.Result{}, err
	}
	table := s.resvOf(key)
	set := table[key]
	before := set.size()
	defer func() { s.bytes.Add(table[key].size() - before) }()
	if set != nil {
		set.prune(now)
		if len(set.list) >= MaxReservations {
			return LeaseID{}, bucket.Result{}, fmt.Errorf("%w: %d live", ErrTooManyReservations, len(set.list))
		}
	}
	var res bucket.Result
	var window int64
	if m == nil {
		res, err = s.takeTokenLocked(sh, key, l, now, estimate, Use{})
	} else {
		res, err = s.takeWindowLocked(sh, m, takeOf(l), key, l, now, estimate, l.Algorithm == bucket.FixedWindowHits, Use{})
		window = (*m)[key].Start
	}
	if err != nil || !res.Allowed {
		return LeaseID{}, res, err
	}
	id := newLeaseID()
	id.Holder = holder
	if set == nil {
		set = &resvSet{}
		table[key] = set
	}
	set.alg = l.Algorithm
	exp := now + int64(ttl)
	set.add(bucket.Reservation{ID: id.ID, Tag: id.Tag, Holder: holder, Estimate: estimate, Window: window, Expires: exp})
	s.noteWrite(sh, key, exp)
	return id, res, nil
}

// takeOf is the take function of a windowed limit l.
func takeOf(l bucket.Limit) func(bucket.WindowState, bucket.Limit, int64, int64) (bucket.WindowState, bucket.Result, error) {
	switch l.Algorithm {
	case bucket.SlidingWindow:
		return bucket.TakeSlidingWindow
	case bucket.FixedWindowHits:
		return bucket.TakeFixedWindowHits
	}
	return bucket.TakeFixedWindow
}

// Settle applies the actual cost of the live reservation id of key (see
// bucket.SettleToken and bucket.SettleWindow): the difference from its
// estimate is refunded or charged. Settling a settled reservation changes
// nothing and reports Already with the first settle's outcome. An ID that
// names no live reservation of key with id.Holder is ErrUnknownReservation.
func (s *Store) Settle(key uint64, l bucket.Limit, now int64, id LeaseID, actual int64) (Settled, error) {
	if actual < 0 {
		return Settled{}, &bucket.FieldError{Field: "actual", Reason: "must be >= 0", Err: bucket.ErrNegativeCost}
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	m, err := reservable(sh, l)
	if err != nil {
		return Settled{}, err
	}
	set := s.resvOf(key)[key]
	at := -1
	if set != nil {
		at = bucket.FindReservation(set.list, now, id.ID, id.Tag, id.Holder)
	}
	if at < 0 {
		return Settled{}, ErrUnknownReservation
	}
	// A copy, written back: a settle into debt may append the key's debt
	// record to set.list, moving it.
	r := set.list[at]
	out := Settled{Estimate: r.Estimate}
	var already bool
	out.Settlement, already = bucket.SettleRecord(&r, actual, func(estimate, actual int64) bucket.Settlement {
		if m == nil {
			return s.settleTokenLocked(sh, key, l, now, estimate, actual)
		}
		return s.settleWindowLocked(sh, m, key, l, now, r.Window, estimate, actual)
	})
	set.list[at] = r
	out.Already, out.Actual = already, r.Actual
	if already {
		out.Result = s.readLocked(sh, m, key, l, now)
		return out, nil
	}
	s.noteWrite(sh, key, r.Expires)
	return out, nil
}

// readLocked reads key's state under l (a settle's Result).
func (s *Store) readLocked(sh *shard, m *map[uint64]bucket.WindowState, key uint64, l bucket.Limit, now int64) bucket.Result {
	if m == nil {
		debt, _ := s.debtLocked(sh, key, now)
		_, _, st := bucket.SettleTokenDebt(s.clampedToken(sh, key, l, now), debt, l, now, 0, 0)
		return st.Result
	}
	_, st := bucket.SettleWindow((*m)[key], l, now, 0, 0, 0)
	return st.Result
}

// settleTokenLocked is Settle on a token bucket, sh.mu held.
func (s *Store) settleTokenLocked(sh *shard, key uint64, l bucket.Limit, now, estimate, actual int64) bucket.Settlement {
	_, ok := sh.tokens[key]
	debt, set := s.debtLocked(sh, key, now)
	next, nd, st := bucket.SettleTokenDebt(s.clampedToken(sh, key, l, now), debt, l, now, estimate, actual)
	switch {
	case tokenIsZero(next, now):
		if ok {
			delete(sh.tokens, key)
			s.drop(sh, key, tokenEntryBytes)
		}
	case ok || s.insertable(sh, key, now, tokenEntryBytes):
		if sh.tokens == nil {
			sh.tokens = make(map[uint64]bucket.TokenState)
		}
		sh.tokens[key] = next
		s.noteToken(sh, key, next)
	default:
		st.Forgiven += st.Charged // no room for the key: nothing is charged
		st.Charged = 0
		return st
	}
	s.setDebtLocked(sh, key, set, debt, nd, now)
	return st
}

// clampedToken is key's token state as a take under l reads it (expired:
// the zero state; beyond l's horizon: clamped, bucket.ClampToken).
func (s *Store) clampedToken(sh *shard, key uint64, l bucket.Limit, now int64) bucket.TokenState {
	in, ok := sh.tokens[key]
	if !ok || tokenIsZero(in, now) {
		return bucket.TokenState{}
	}
	if l.Limit > 0 {
		in, _ = bucket.ClampToken(in, l, now)
	}
	return in
}

// settleWindowLocked is Settle on a window, sh.mu held.
func (s *Store) settleWindowLocked(sh *shard, m *map[uint64]bucket.WindowState, key uint64, l bucket.Limit, now, window, estimate, actual int64) bucket.Settlement {
	old, ok := (*m)[key]
	next, st := bucket.SettleWindow(old, l, now, window, estimate, actual)
	switch {
	case windowIsZero(next, now):
		if ok {
			delete(*m, key)
			s.drop(sh, key, windowEntryBytes)
		}
	case ok || s.insertable(sh, key, now, windowEntryBytes):
		if *m == nil {
			*m = make(map[uint64]bucket.WindowState)
		}
		(*m)[key] = next
		s.noteWrite(sh, key, next.ExpiresAt())
	default:
		st.Forgiven += st.Charged
		st.Charged = 0
	}
	return st
}

// insertable reserves room for a new key of size bytes (see reserve).
func (s *Store) insertable(sh *shard, key uint64, now, size int64) bool {
	_, err := s.reserve(sh, key, now, size, Use{})
	return err == nil
}

// exportResv gives key's live reservations to the entry of buf[from:]
// that holds the key's state of their algorithm, or else appends them as
// an Entry with the zero state: a key stays one entry when it can (a peer
// that predates reservations takes at most one state per key it fetches).
// The caller holds the key's shard lock.
func (s *Store) exportResv(buf []Entry, from int, key uint64, now int64) []Entry {
	set := s.resv[s.shardIndex(key)][key]
	if set == nil {
		return buf
	}
	before := set.size()
	set.prune(now)
	if len(set.list) == 0 {
		delete(s.resv[s.shardIndex(key)], key)
		s.bytes.Add(-before)
		return buf
	}
	s.bytes.Add(set.size() - before)
	for i := from; i < len(buf); i++ {
		if buf[i].Key == key && buf[i].Algorithm == set.alg {
			buf[i].Reservations = slices.Clone(set.list)
			return buf
		}
	}
	return append(buf, Entry{Key: key, Algorithm: set.alg, Reservations: slices.Clone(set.list)})
}

// exportResvShard gives the live reservations of shard i's keys that keep
// to their entries in buf[from:] (see exportResv).
func (s *Store) exportResvShard(buf []Entry, from, i int, now int64, keep func(uint64) bool) []Entry {
	if len(s.resv[i]) == 0 {
		return buf
	}
	at := make(map[uint64]int, len(buf)-from)
	for j := from; j < len(buf); j++ {
		if _, ok := at[buf[j].Key]; !ok {
			at[buf[j].Key] = j // the key's first entry: exportResv looks on from it
		}
	}
	for k := range s.resv[i] {
		if keep != nil && !keep(k) {
			continue
		}
		if j, ok := at[k]; ok {
			buf = s.exportResv(buf, j, k, now)
		} else {
			buf = s.exportResv(buf, len(buf), k, now)
		}
	}
	return buf
}

// dropResv removes key's reservations. The caller holds its shard lock.
func (s *Store) dropResv(key uint64) {
	m := s.resv[s.shardIndex(key)]
	s.bytes.Add(-m[key].size())
	delete(m, key)
}

// sweepResv drops the reservations of shard i that ended by now, and
// returns the earliest end of those left (math.MaxInt64 for none).
func (s *Store) sweepResv(i int, now, next int64) int64 {
	for k, set := range s.resv[i] {
		before := set.size()
		set.prune(now)
		if len(set.list) == 0 {
			delete(s.resv[i], k)
			s.bytes.Add(-before)
			continue
		}
		s.bytes.Add(set.size() - before)
		for _, r := range set.list {
			next = min(next, r.Expires)
		}
	}
	return next
}

// importResv merges the reservations of e (whose shard lock the caller
// holds) into the key's: one per ID, a settled one over an unsettled one,
// the later expiry.
func (s *Store) importResv(e *Entry, now int64) {
	live := bucket.LiveReservations(slices.Clone(e.Reservations), now)
	if len(live) == 0 {
		return
	}
	table := s.resvOf(e.Key)
	set := table[e.Key]
	before := set.size()
	if set == nil {
		set = &resvSet{}
		table[e.Key] = set
	}
	defer func() { s.bytes.Add(set.size() - before) }()
	set.alg = e.Algorithm
	set.prune(now)
	at := make(map[[2]uint64]int, len(set.list))
	for i, o := range set.list {
		at[[2]uint64{o.ID, o.Tag}] = i
	}
	var exp int64
	for _, r := range live {
		exp = max(exp, r.Expires)
		i, ok := at[[2]uint64{r.ID, r.Tag}]
		switch {
		case !ok:
			if len(set.list) < MaxReservations {
				at[[2]uint64{r.ID, r.Tag}] = len(set.list)
				set.add(r)
			}
		case r.Settled && !set.list[i].Settled:
			set.list[i] = r
			set.first = min(set.first, r.Expires)
		default:
			set.list[i].Expires = max(set.list[i].Expires, r.Expires)
		}
	}
	s.noteWrite(s.shardOf(e.Key), e.Key, exp)
}

// indexOf is the index of sh in s.shards.
func (s *Store) indexOf(sh *shard) int {
	return int((uintptr(unsafe.Pointer(sh)) - uintptr(unsafe.Pointer(&s.shards[0]))) / uintptr(shardSize))
}
