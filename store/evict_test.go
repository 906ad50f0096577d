package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// An evictable token key costs its state and its last use.
const evictableTokenBytes = tokenEntryBytes + metaEntryBytes

// hourly is a token bucket of 10 units an hour: one take keeps a state for
// six minutes.
var hourly = lim(bucket.TokenBucket, 10, time.Hour)

// fill takes one unit of each key in keys at now, of kind, and fails the
// test on an error.
func fill(t *testing.T, s *Store, now int64, kind Kind, keys ...uint64) {
	t.Helper()
	for _, k := range keys {
		if res, err := s.TakeAs(k, hourly, now, 1, Use{Kind: kind}); err != nil || !res.Allowed {
			t.Fatalf("take of key %d: %+v, %v", k, res, err)
		}
	}
}

// remaining returns what key has left under hourly at now (10 when it has
// no state).
func remaining(t *testing.T, s *Store, key uint64, now int64) int64 {
	t.Helper()
	res, err := s.Take(key, hourly, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.Remaining
}

func TestEvictsLeastRecentlyUsedEvictableKey(t *testing.T) {
	// One shard and room for four evictable keys: every eviction samples
	// all of them, so it is exact LRU.
	s := newStore(t, Config{Shards: 1, MaxBytes: 4 * evictableTokenBytes})
	for i := range uint64(4) {
		fill(t, s, t0+int64(i)*2*sec, Evictable, i+1) // key 1 oldest, key 4 newest
	}
	// Key 1 is used again (a deny or a read counts as a use too): key 2 is
	// now the least recently used.
	fill(t, s, t0+10*sec, Evictable, 1)
	if st := s.Stats(); st.Keys != 4 || st.Bytes != 4*evictableTokenBytes {
		t.Fatalf("before: %+v", st)
	}
	fill(t, s, t0+12*sec, Evictable, 5)
	st := s.Stats()
	if st.EvictedLRU != 1 || st.EvictedExpired != 0 || st.Refused != 0 || st.Keys != 4 {
		t.Fatalf("after a new key: %+v, want one LRU eviction", st)
	}
	now := t0 + 13*sec
	if !s.Has(now, 1) || s.Has(now, 2) || !s.Has(now, 3) || !s.Has(now, 4) || !s.Has(now, 5) {
		t.Errorf("kept 1..5 = %v %v %v %v %v, want key 2 evicted", s.Has(now, 1), s.Has(now, 2), s.Has(now, 3), s.Has(now, 4), s.Has(now, 5))
	}
	// The evicted key's count is forgotten: the chosen trade.
	if got := remaining(t, s, 2, now); got != 10 {
		t.Errorf("evicted key 2 has %d left, want a full bucket (10)", got)
	}
	checkCounters(t, s)
}

func TestFullStoreAdmitsPinnedKeyByEvicting(t *testing.T) {
	s := newStore(t, Config{Shards: 1, MaxBytes: 4 * evictableTokenBytes})
	fill(t, s, t0, Evictable, 1, 2, 3, 4)
	fill(t, s, t0+2*sec, Pinned, 100)
	if st := s.Stats(); st.EvictedLRU != 1 || st.Refused != 0 {
		t.Fatalf("pinned key over a full store: %+v, want one eviction", st)
	}
	// Pinned keys are never evicted: more of them evict the evictable
	// ones, down to none; then new keys are refused. The store holds 8
	// pinned keys (100 and 7 more).
	now := t0 + 4*sec
	for k := uint64(101); k <= 120; k++ {
		if _, err := s.TakeAs(k, hourly, now, 1, Use{}); err != nil && !errors.Is(err, ErrFull) {
			t.Fatal(err)
		}
	}
	for k := uint64(100); k <= 107; k++ {
		if !s.Has(now, k) {
			t.Errorf("pinned key %d was evicted or refused", k)
		}
	}
	st := s.Stats()
	if st.EvictedLRU != 4 || st.Refused != 13 || st.Keys != 8 {
		t.Fatalf("after filling with pinned keys: %+v, want 4 evictions, 8 keys and 13 refused", st)
	}
	for _, kind := range []Kind{Evictable, Pinned} {
		_, err := s.TakeAs(200, hourly, now, 1, Use{Kind: kind})
		if !errors.Is(err, ErrFull) {
			t.Errorf("new %v key in a store full of pinned keys: %v, want ErrFull", kind, err)
		}
	}
	checkCounters(t, s)
}

func TestEvictsExpiredBeforeLive(t *testing.T) {
	s := newStore(t, Config{Shards: 1, MaxBytes: 4 * evictableTokenBytes})
	short := lim(bucket.TokenBucket, 10, time.Second) // one take: a state for 100ms
	if _, err := s.TakeAs(1, short, t0, 1, Use{Kind: Evictable}); err != nil {
		t.Fatal(err)
	}
	fill(t, s, t0, Evictable, 2, 3, 4)
	fill(t, s, t0+sec, Evictable, 5) // key 1 has expired by now
	st := s.Stats()
	if st.EvictedExpired != 1 || st.EvictedLRU != 0 {
		t.Fatalf("%+v, want the expired key dropped and no live one", st)
	}
	for _, k := range []uint64{2, 3, 4, 5} {
		if !s.Has(t0+sec, k) {
			t.Errorf("live key %d was evicted", k)
		}
	}
	checkCounters(t, s)
}

func TestEvictsEveryKindOfState(t *testing.T) {
	// A new sliding log needs more than one small state's room: it evicts
	// as many as it needs.
	s := newStore(t, Config{Shards: 1, MaxBytes: 3 * (windowEntryBytes + metaEntryBytes)})
	fixed := lim(bucket.FixedWindow, 10, time.Hour)
	for k := range uint64(3) {
		if _, err := s.TakeAs(k+1, fixed, t0+int64(k)*2*sec, 1, Use{Kind: Evictable}); err != nil {
			t.Fatal(err)
		}
	}
	logs := lim(bucket.SlidingLog, 10, time.Hour)
	if _, err := s.TakeAs(9, logs, t0+10*sec, 1, Use{Kind: Evictable}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.EvictedLRU == 0 || st.Bytes > s.maxBytes {
		t.Fatalf("%+v, want evictions to make room for the log", st)
	}
	if s.Has(t0+10*sec, 1) {
		t.Error("the oldest window survived")
	}
	checkCounters(t, s)
}

func TestUntrackedWhenStatesGo(t *testing.T) {
	s := newStore(t, Config{Shards: 4, MaxBytes: 1 << 20})
	fill(t, s, t0, Evictable, 1, 2, 3, 4, 5, 6)
	s.Delete([]uint64{1})
	s.Extract(t0, []uint64{2})
	s.DeleteIf(func(k uint64) bool { return k == 3 })
	if _, _, err := s.GiveBack(4, hourly, t0, 10); err != nil { // refilled: the state goes
		t.Fatal(err)
	}
	checkCounters(t, s)
	s.Sweep(t0 + time.Hour.Nanoseconds())
	checkCounters(t, s)
	if st := s.Stats(); st.Keys != 0 || st.Bytes != 0 {
		t.Fatalf("after every state went: %+v", st)
	}
}

func TestImportedKeyTrackedAtItsNextEvictableUse(t *testing.T) {
	s := newStore(t, Config{Shards: 1, MaxBytes: 2 * evictableTokenBytes})
	if err := s.Import(Entry{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0 + time.Minute.Nanoseconds()}}, t0); err != nil {
		t.Fatal(err)
	}
	fill(t, s, t0, Evictable, 2)
	// Key 1 came without a kind: pinned, so key 3 finds only key 2 to
	// evict.
	fill(t, s, t0+2*sec, Evictable, 3)
	if s.Has(t0+2*sec, 2) || !s.Has(t0+2*sec, 1) {
		t.Fatal("evicted the imported key, or kept key 2")
	}
	fill(t, s, t0+4*sec, Evictable, 1) // its next use makes it evictable
	checkCounters(t, s)
	fill(t, s, t0+6*sec, Evictable, 4)
	if st := s.Stats(); st.EvictedLRU != 2 || st.Refused != 0 {
		t.Fatalf("%+v, want the used imported key evictable", st)
	}
	checkCounters(t, s)
}

func TestNoTrackingWithoutCap(t *testing.T) {
	s := newStore(t, Config{Shards: 1})
	fill(t, s, t0, Evictable, 1)
	if st := s.Stats(); s.meta != nil || st.Bytes != tokenEntryBytes {
		t.Fatalf("uncapped store tracks uses: %+v", st)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Pinned: "pinned", Evictable: "evictable", 7: "Kind(7)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestMaxKeysPerClient(t *testing.T) {
	s := newStore(t, Config{Shards: 4, MaxKeysPerClient: 3})
	a, b := Use{Client: 0xa}, Use{Kind: Evictable, Client: 0xb}
	take := func(key uint64, now int64, as Use) error {
		t.Helper()
		_, err := s.TakeAs(key, hourly, now, 1, as)
		return err
	}
	for k := uint64(1); k <= 3; k++ {
		if err := take(k, t0, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := take(4, t0, a); !errors.Is(err, ErrClientFull) || !strings.Contains(err.Error(), "3 live keys") {
		t.Fatalf("client a's 4th key: %v, want ErrClientFull naming the cap", err)
	}
	// The others are not held back, and a's keys keep working, for a and
	// for b (whose use of them does not count against b).
	for k := uint64(11); k <= 13; k++ {
		if err := take(k, t0, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, as := range []Use{a, b, {}} {
		if err := take(1, t0, as); err != nil {
			t.Fatalf("a's existing key for %+v: %v", as, err)
		}
	}
	if err := take(20, t0, Use{}); err != nil {
		t.Fatalf("a key of no client: %v", err)
	}
	if got, st := s.ClientKeys(0xa), s.Stats(); got != 3 || s.ClientKeys(0xb) != 3 || st.ClientRefused != 1 {
		t.Fatalf("ClientKeys(a) = %d, (b) = %d, %+v; want 3, 3 and one refused", got, s.ClientKeys(0xb), st)
	}
	checkCounters(t, s)
	// A key gone (deleted, refilled) counts no more; expired and swept
	// neither.
	s.Delete([]uint64{1})
	if _, _, err := s.GiveBack(2, hourly, t0, 10); err != nil {
		t.Fatal(err)
	}
	if got := s.ClientKeys(0xa); got != 1 {
		t.Fatalf("after a delete and a refill: ClientKeys(a) = %d, want 1", got)
	}
	if err := take(4, t0, a); err != nil {
		t.Fatalf("client a below its cap again: %v", err)
	}
	checkCounters(t, s)
	s.Sweep(t0 + time.Hour.Nanoseconds())
	if s.ClientKeys(0xa) != 0 || s.ClientKeys(0xb) != 0 || len(s.clients.index) != 0 {
		t.Fatalf("after the sweep: a %d, b %d, %d clients indexed; want none", s.ClientKeys(0xa), s.ClientKeys(0xb), len(s.clients.index))
	}
	checkCounters(t, s)
}

func TestMaxKeysPerClientEvictedAndRefused(t *testing.T) {
	// An evicted key of a client counts no more; a key the memory cap
	// refuses never counted.
	s := newStore(t, Config{Shards: 1, MaxBytes: 2 * evictableTokenBytes, MaxKeysPerClient: 2})
	a := Use{Kind: Evictable, Client: 0xa}
	for k := uint64(1); k <= 2; k++ {
		if _, err := s.TakeAs(k, hourly, t0+int64(k)*2*sec, 1, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.TakeAs(3, hourly, t0+6*sec, 1, Use{Kind: Evictable}); err != nil {
		t.Fatal(err) // evicts key 1
	}
	if got := s.ClientKeys(0xa); got != 1 {
		t.Fatalf("after an eviction: ClientKeys(a) = %d, want 1", got)
	}
	s2 := newStore(t, Config{Shards: 1, MaxBytes: tokenEntryBytes, MaxKeysPerClient: 2})
	if _, err := s2.TakeAs(1, hourly, t0, 1, Use{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.TakeAs(2, hourly, t0, 1, Use{Client: 0xa}); !errors.Is(err, ErrFull) {
		t.Fatalf("a new key of a full store: %v, want ErrFull", err)
	}
	if got := s2.ClientKeys(0xa); got != 0 {
		t.Fatalf("a refused key counted: ClientKeys(a) = %d", got)
	}
	checkCounters(t, s)
	checkCounters(t, s2)
}
