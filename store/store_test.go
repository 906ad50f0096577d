package store

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// step is one Take in a scripted sequence: at t0+at, spend cost, expect
// allowed and remaining (remaining < 0: not checked).
type step struct {
	at        int64
	cost      int64
	allowed   bool
	remaining int64
}

func TestTakeAlgorithms(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit bucket.Limit
		steps []step
	}{
		{
			name:  "token bucket 10/s",
			limit: lim(bucket.TokenBucket, 10, time.Second),
			steps: []step{
				{0, 10, true, 0},
				{0, 1, false, 0},
				{100 * ms, 1, true, 0},  // one token per 100ms
				{150 * ms, 1, false, 0}, // not yet the next one
				{1100 * ms, 0, true, 10},
				{1100 * ms, 4, true, 6},
			},
		},
		{
			name:  "token bucket burst 5 of 1/s",
			limit: bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 1, Period: time.Second, Burst: 5},
			steps: []step{
				{0, 5, true, 0},
				{500 * ms, 1, false, 0},
				{2 * sec, 2, true, 0},
				{7 * sec, 0, true, 5},
			},
		},
		{
			name:  "fixed window 3/s",
			limit: lim(bucket.FixedWindow, 3, time.Second),
			steps: []step{
				{0, 1, true, 2},
				{500 * ms, 2, true, 0},
				{900 * ms, 1, false, 0},
				{999 * ms, 0, true, 0},
				{1000 * ms, 1, true, 2}, // next window
				{2500 * ms, 0, true, 3},
			},
		},
		{
			name:  "sliding window 10/s",
			limit: lim(bucket.SlidingWindow, 10, time.Second),
			steps: []step{
				{0, 10, true, 0},
				{500 * ms, 1, false, 0},
				// Half-way into the next window the previous one
				// weighs 10 * 1/2 = 5.
				{1500 * ms, 5, true, 0},
				{1500 * ms, 1, false, 0},
				{3500 * ms, 0, true, 10},
			},
		},
		{
			name:  "sliding log 3/s",
			limit: lim(bucket.SlidingLog, 3, time.Second),
			steps: []step{
				{0, 1, true, 2},
				{400 * ms, 1, true, 1},
				{800 * ms, 1, true, 0},
				{900 * ms, 1, false, 0},
				{1200 * ms, 1, true, 0}, // the admission at 0 left the log
				{1300 * ms, 1, false, 0},
				{2900 * ms, 0, true, 3},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, Config{Shards: 16})
			for i, st := range tc.steps {
				res, err := s.Take(42, tc.limit, t0+st.at, st.cost)
				if err != nil {
					t.Fatalf("step %d %+v: %v", i, st, err)
				}
				if res.Allowed != st.allowed || (st.remaining >= 0 && res.Remaining != st.remaining) {
					t.Fatalf("step %d %+v: got allowed=%v remaining=%d", i, st, res.Allowed, res.Remaining)
				}
				if res.Limit != tc.limit.Capacity() {
					t.Fatalf("step %d: Result.Limit = %d, want %d", i, res.Limit, tc.limit.Capacity())
				}
				checkCounters(t, s)
			}
			// Another key of the same store is untouched.
			res, err := s.Take(43, tc.limit, t0+tc.steps[len(tc.steps)-1].at, 0)
			if err != nil || res.Remaining != tc.limit.Capacity() {
				t.Fatalf("other key: %+v, %v; want full", res, err)
			}
		})
	}
}

func TestAcquireRelease(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	l := lim(bucket.Concurrency, 2, 0)
	ttl := 10 * time.Second
	id1, res, err := s.Acquire(7, l, t0, 1, ttl)
	if err != nil || !res.Allowed || res.Remaining != 1 || id1.IsZero() {
		t.Fatalf("first acquire: id=%d %+v %v", id1, res, err)
	}
	id2, res, err := s.Acquire(7, l, t0+ms, 1, ttl)
	if err != nil || !res.Allowed || res.Remaining != 0 || id2.IsZero() || id2 == id1 {
		t.Fatalf("second acquire: id=%d (first %d) %+v %v", id2, id1, res, err)
	}
	id3, res, err := s.Acquire(7, l, t0+2*ms, 1, ttl)
	if err != nil || res.Allowed || !id3.IsZero() {
		t.Fatalf("third acquire: id=%d %+v %v; want denied with id 0", id3, res, err)
	}
	ok, res, err := s.Release(7, l, t0+3*ms, id1)
	if err != nil || !ok || res.Remaining != 1 {
		t.Fatalf("release: %v %+v %v", ok, res, err)
	}
	if ok, _, _ := s.Release(7, l, t0+4*ms, id1); ok {
		t.Fatal("second release of the same lease succeeded")
	}
	if st := s.Stats(); st.Keys != 1 {
		t.Fatalf("Keys = %d, want 1", st.Keys)
	}
	// id2 lapses at t0+1ms+ttl: the key is then free again.
	later := t0 + 2*int64(ttl)
	if ok, _, _ := s.Release(7, l, later, id2); ok {
		t.Fatal("released a lapsed lease")
	}
	if st := s.Stats(); st.Keys != 0 {
		t.Fatalf("Keys = %d after the last lease lapsed, want 0", st.Keys)
	}
	_, res, err = s.Acquire(7, l, later, 2, ttl)
	if err != nil || !res.Allowed || res.Remaining != 0 {
		t.Fatalf("acquire after lapse: %+v %v", res, err)
	}
	checkCounters(t, s)
}

func TestWrongAlgorithm(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	if _, err := s.Take(1, lim(bucket.Concurrency, 5, 0), t0, 1); !errors.Is(err, ErrWrongAlgorithm) {
		t.Errorf("Take(concurrency) = %v, want ErrWrongAlgorithm", err)
	}
	if _, _, err := s.Acquire(1, lim(bucket.TokenBucket, 5, time.Second), t0, 1, time.Second); !errors.Is(err, ErrWrongAlgorithm) {
		t.Errorf("Acquire(token) = %v, want ErrWrongAlgorithm", err)
	}
	if _, _, err := s.Release(1, lim(bucket.FixedWindow, 5, time.Second), t0, LeaseID{ID: 1}); !errors.Is(err, ErrWrongAlgorithm) {
		t.Errorf("Release(fixed) = %v, want ErrWrongAlgorithm", err)
	}
	if _, err := s.Take(1, bucket.Limit{Algorithm: 0, Limit: 1, Period: time.Second}, t0, 1); !errors.Is(err, bucket.ErrUnknownAlgorithm) {
		t.Errorf("Take(algorithm 0) = %v, want ErrUnknownAlgorithm", err)
	}
	if st := s.Stats(); st.Keys != 0 {
		t.Fatalf("Keys = %d, want 0", st.Keys)
	}
}

// takeLimits are one limit per Take algorithm, 100 units per hour.
var takeLimits = []bucket.Limit{
	lim(bucket.TokenBucket, 100, time.Hour),
	lim(bucket.FixedWindow, 100, time.Hour),
	lim(bucket.SlidingWindow, 100, time.Hour),
	lim(bucket.SlidingLog, 100, time.Hour),
}

func TestReadDoesNotInsert(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	for _, l := range takeLimits {
		res, err := s.Take(9, l, t0, 0)
		if err != nil || res.Remaining != 100 {
			t.Fatalf("%v read: %+v %v", l.Algorithm, res, err)
		}
	}
	id, res, err := s.Acquire(9, lim(bucket.Concurrency, 100, 0), t0, 0, time.Minute)
	if err != nil || !id.IsZero() || res.Remaining != 100 {
		t.Fatalf("concurrency read: id=%d %+v %v", id, res, err)
	}
	if ok, _, err := s.Release(9, lim(bucket.Concurrency, 100, 0), t0, LeaseID{ID: 12345}); ok || err != nil {
		t.Fatalf("release on absent key: %v %v", ok, err)
	}
	if st := s.Stats(); st.Keys != 0 || st.Bytes != 0 {
		t.Fatalf("reads inserted: %+v", st)
	}
	checkCounters(t, s)
}

func TestErrorsDoNotInsert(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	for _, l := range takeLimits {
		if _, err := s.Take(9, l, t0, 101); !errors.Is(err, bucket.ErrCostExceedsCapacity) {
			t.Errorf("%v cost 101 of 100: %v, want ErrCostExceedsCapacity", l.Algorithm, err)
		}
		if _, err := s.Take(9, l, t0, -1); !errors.Is(err, bucket.ErrNegativeCost) {
			t.Errorf("%v cost -1: %v, want ErrNegativeCost", l.Algorithm, err)
		}
	}
	if _, _, err := s.Acquire(9, lim(bucket.Concurrency, 100, 0), t0, 101, time.Minute); !errors.Is(err, bucket.ErrCostExceedsCapacity) {
		t.Errorf("concurrency cost 101 of 100: %v", err)
	}
	if st := s.Stats(); st.Keys != 0 || st.Bytes != 0 {
		t.Fatalf("failed takes inserted: %+v", st)
	}
}

// TestDeniedNewKeyNotInserted drives the store's insertion logic with a fake
// algorithm that denies (no real algorithm denies a zero state, so this
// needs the seam): a denied take of a new key must not insert it, even if
// the algorithm returned a non-zero state.
func TestDeniedNewKeyNotInserted(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	deny := func(in bucket.WindowState, l bucket.Limit, now, cost int64) (bucket.WindowState, bucket.Result, error) {
		return bucket.WindowState{Start: now, Expires: now + sec, Cur: 1}, bucket.Result{Allowed: false, Limit: l.Limit}, nil
	}
	allow := func(in bucket.WindowState, l bucket.Limit, now, cost int64) (bucket.WindowState, bucket.Result, error) {
		return bucket.WindowState{Start: now, Expires: now + sec, Cur: in.Cur + cost}, bucket.Result{Allowed: true, Limit: l.Limit}, nil
	}
	sh := s.shardOf(5)
	l := lim(bucket.FixedWindow, 10, time.Second)
	if res, err := s.takeWindow(sh, &sh.fixed, deny, 5, l, t0, 1, false, Use{}); err != nil || res.Allowed {
		t.Fatalf("deny: %+v %v", res, err)
	}
	if st := s.Stats(); st.Keys != 0 || sh.fixed != nil {
		t.Fatalf("denied new key was inserted: %+v", st)
	}
	if _, err := s.takeWindow(sh, &sh.fixed, allow, 5, l, t0, 1, false, Use{}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Keys != 1 || st.Bytes != windowEntryBytes {
		t.Fatalf("allowed new key: %+v, want one key", st)
	}
	// A denied take of an existing key keeps (and may update) its state.
	if _, err := s.takeWindow(sh, &sh.fixed, deny, 5, l, t0, 1, false, Use{}); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Keys != 1 {
		t.Fatalf("denied take of an existing key removed it: %+v", st)
	}
	checkCounters(t, s)
}

// TestExpiredStateIsZero checks that a take on an expired state gives
// exactly what it gives on a fresh store, whether or not a sweep ran.
func TestExpiredStateIsZero(t *testing.T) {
	for _, l := range takeLimits {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			s := newStore(t, Config{Shards: 16})
			for i := int64(0); i < 5; i++ {
				for _, key := range []uint64{1, 2} {
					if _, err := s.Take(key, l, t0+i*sec, 10); err != nil {
						t.Fatal(err)
					}
				}
			}
			later := t0 + 3*int64(time.Hour) + 17*sec
			for _, tc := range []struct {
				key  uint64
				cost int64
			}{{1, 0}, {2, 30}} {
				fresh := newStore(t, Config{Shards: 16})
				want, err := fresh.Take(tc.key, l, later, tc.cost)
				if err != nil {
					t.Fatal(err)
				}
				got, err := s.Take(tc.key, l, later, tc.cost)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("key %d cost %d on an expired state = %+v, fresh store says %+v", tc.key, tc.cost, got, want)
				}
			}
			// The read of expired key 1 dropped it; key 2 holds a new state.
			if st := s.Stats(); st.Keys != 1 {
				t.Fatalf("Keys = %d, want 1", st.Keys)
			}
			checkCounters(t, s)
		})
	}
}

func TestReadOfExpiredStateDropsIt(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	l := lim(bucket.TokenBucket, 10, time.Second)
	if _, err := s.Take(1, l, t0, 5); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Keys != 1 {
		t.Fatalf("Keys = %d, want 1", st.Keys)
	}
	res, err := s.Take(1, l, t0+10*sec, 0)
	if err != nil || res.Remaining != 10 {
		t.Fatalf("read: %+v %v", res, err)
	}
	if st := s.Stats(); st.Keys != 0 || st.Bytes != 0 {
		t.Fatalf("read of an expired state kept it: %+v", st)
	}
}

func TestSweepRemovesOnlyExpired(t *testing.T) {
	s := newStore(t, Config{Shards: 8})
	// Token keys 1..10 take i units of 10/s: key i is full again at
	// t0 + i*100ms.
	tl := lim(bucket.TokenBucket, 10, time.Second)
	for i := int64(1); i <= 10; i++ {
		if _, err := s.Take(uint64(i), tl, t0, i); err != nil {
			t.Fatal(err)
		}
	}
	// A fixed window (ends at t0+1s), a sliding window (carries until
	// t0+2s), a log (until t0+300ms+1s) and a lease (until t0+1500ms).
	if _, err := s.Take(100, lim(bucket.FixedWindow, 10, time.Second), t0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(101, lim(bucket.SlidingWindow, 10, time.Second), t0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(102, lim(bucket.SlidingLog, 10, time.Second), t0+300*ms, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Acquire(103, lim(bucket.Concurrency, 10, 0), t0, 1, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
	for _, tc := range []struct {
		at      int64
		removed int
		keys    int64
	}{
		{0, 0, 14},
		{550 * ms, 5, 9}, // token keys 1..5
		{550 * ms, 0, 9},
		{999 * ms, 4, 5}, // token keys 6..9
		{1000 * ms, 2, 3},
		{1300*ms - 1, 0, 3}, // one nanosecond early: nothing
		{1300 * ms, 1, 2},   // the log
		{1500*ms - 1, 0, 2},
		{1999 * ms, 1, 1}, // the lease
		{2000*ms - 1, 0, 1},
		{2000 * ms, 1, 0}, // the sliding window
	} {
		if n := s.Sweep(t0 + tc.at); n != tc.removed {
			t.Fatalf("Sweep(t0+%dms) = %d, want %d", tc.at/ms, n, tc.removed)
		}
		if st := s.Stats(); st.Keys != tc.keys {
			t.Fatalf("after Sweep(t0+%dms): Keys = %d, want %d", tc.at/ms, st.Keys, tc.keys)
		}
		checkCounters(t, s)
		if tc.at == 550*ms {
			// The survivors kept their state: key 10 (full at t0+1s)
			// has 5.5 tokens.
			res, err := s.Take(10, tl, t0+tc.at, 0)
			if err != nil || res.Remaining != 5 {
				t.Fatalf("key 10 after sweep: %+v %v, want 5 remaining", res, err)
			}
		}
	}
	checkMapsFreed(t, s)
}

// checkMapsFreed fails the test if a shard of s holds a map.
func checkMapsFreed(t *testing.T, s *Store) {
	t.Helper()
	for i := range s.shards {
		sh := &s.shards[i]
		if sh.tokens != nil || sh.fixed != nil || sh.sliding != nil || sh.hits != nil || sh.logs != nil || sh.leases != nil {
			t.Fatalf("shard %d kept an empty map", i)
		}
	}
}

func TestMemoryCap(t *testing.T) {
	s := newStore(t, Config{Shards: 4, MaxBytes: 10 * tokenEntryBytes})
	l := lim(bucket.TokenBucket, 10, time.Second)
	for k := uint64(1); k <= 10; k++ {
		if _, err := s.Take(k, l, t0, 1); err != nil {
			t.Fatalf("key %d: %v", k, err)
		}
	}
	res, err := s.Take(11, l, t0, 1)
	if !errors.Is(err, ErrFull) || res.Allowed {
		t.Fatalf("new key over the cap: %+v %v, want ErrFull", res, err)
	}
	if st := s.Stats(); st.Keys != 10 || st.Refused != 1 || st.Bytes != 10*tokenEntryBytes {
		t.Fatalf("Stats = %+v, want 10 keys, 1 refused", st)
	}
	// Other algorithms' new keys are refused too.
	if _, err := s.Take(12, lim(bucket.FixedWindow, 10, time.Second), t0, 1); !errors.Is(err, ErrFull) {
		t.Fatalf("new window key: %v, want ErrFull", err)
	}
	if _, _, err := s.Acquire(12, lim(bucket.Concurrency, 10, 0), t0, 1, time.Second); !errors.Is(err, ErrFull) {
		t.Fatalf("new lease key: %v, want ErrFull", err)
	}
	// Existing keys keep working, reads of new keys too.
	for k := uint64(1); k <= 10; k++ {
		if res, err := s.Take(k, l, t0+ms, 2); err != nil || !res.Allowed || res.Remaining != 7 {
			t.Fatalf("existing key %d: %+v %v", k, res, err)
		}
	}
	if res, err := s.Take(11, l, t0+ms, 0); err != nil || res.Remaining != 10 {
		t.Fatalf("read of a new key when full: %+v %v", res, err)
	}
	if st := s.Stats(); st.Refused != 3 {
		t.Fatalf("Refused = %d, want 3", st.Refused)
	}
	// Once the states expired, a new key sweeps its shard and gets in.
	later := t0 + 2*sec
	if res, err := s.Take(11, l, later, 1); err != nil || !res.Allowed {
		t.Fatalf("new key after expiry: %+v %v", res, err)
	}
	st := s.Stats()
	if st.Keys >= 10 || st.Refused != 3 {
		t.Fatalf("Stats = %+v, want the new key in after a sweep of its shard", st)
	}
	checkCounters(t, s)
}

func TestStoresAreIndependent(t *testing.T) {
	a := newStore(t, Config{Shards: 16})
	b := newStore(t, Config{Shards: 16})
	l := lim(bucket.TokenBucket, 10, time.Second)
	if _, err := a.Take(1, l, t0, 10); err != nil {
		t.Fatal(err)
	}
	res, err := b.Take(1, l, t0, 1)
	if err != nil || !res.Allowed || res.Remaining != 9 {
		t.Fatalf("store b saw store a's take: %+v %v", res, err)
	}
	if a.Stats().Keys != 1 || b.Stats().Keys != 1 {
		t.Fatalf("stats: a %+v b %+v", a.Stats(), b.Stats())
	}
}

func TestEmptyStoreIsSmall(t *testing.T) {
	s := newStore(t, DefaultConfig())
	checkMapsFreed(t, s) // no map before any insert
	if shardSize != 64 {
		t.Fatalf("shard is %d bytes, want one cache line", shardSize)
	}
}

func TestSameKeyDifferentAlgorithms(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	limits := append(slices.Clone(takeLimits), lim(bucket.FixedWindowHits, 100, time.Hour))
	for _, l := range limits {
		res, err := s.Take(77, l, t0, 40)
		if err != nil || !res.Allowed || res.Remaining != 60 {
			t.Fatalf("%v: %+v %v; states of one key must be independent per algorithm", l.Algorithm, res, err)
		}
	}
	if st := s.Stats(); st.Keys != int64(len(limits)) {
		t.Fatalf("Keys = %d, want %d", st.Keys, len(limits))
	}
}

func TestLeaseIDs(t *testing.T) {
	seen := make(map[LeaseID]bool)
	for range 20000 {
		id := newLeaseID()
		if id.ID == 0 || seen[id] {
			t.Fatalf("lease ID %v is zero or repeated", id)
		}
		seen[id] = true
		back, err := ParseLeaseID(id.String())
		if err != nil || back != id {
			t.Fatalf("ParseLeaseID(%q) = %v, %v", id.String(), back, err)
		}
	}
	// Release and Renew need the whole ID: the right ID with another tag
	// changes nothing.
	s := newStore(t, Config{Shards: 1})
	l := lim(bucket.Concurrency, 1, 0)
	id, _, _ := s.Acquire(3, l, t0, 1, time.Hour)
	wrong := LeaseID{ID: id.ID, Tag: id.Tag + 1}
	if ok, _, _ := s.Renew(3, l, t0, 1, time.Second, wrong); ok {
		t.Fatal("renewed with a wrong tag")
	}
	if ok, res, _ := s.Release(3, l, t0, wrong); ok || res.Remaining != 0 {
		t.Fatalf("released with a wrong tag: %v %+v", ok, res)
	}
	if ok, _, _ := s.Release(3, l, t0, id); !ok {
		t.Fatal("not released with the right ID")
	}
	for _, bad := range []string{"", "1", "00000000000000000000000000000000", "zz000000000000000000000000000001", "0000000000000001000000000000000100"} {
		if _, err := ParseLeaseID(bad); err == nil {
			t.Errorf("ParseLeaseID(%q) succeeded", bad)
		}
	}
}

func TestLogMemoryIsTracked(t *testing.T) {
	s := newStore(t, Config{Shards: 1})
	l := lim(bucket.SlidingLog, 1000, time.Second)
	for i := int64(0); i < 200; i++ {
		if _, err := s.Take(1, l, t0+i*ms, 1); err != nil {
			t.Fatal(err)
		}
	}
	checkCounters(t, s)
	if b := s.Stats().Bytes; b < logEntryBytes+200*logItemBytes {
		t.Fatalf("Bytes = %d for a 200-entry log", b)
	}
	// One second later all but the newest entry have left the window.
	if _, err := s.Take(1, l, t0+1199*ms, 1); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, s)
	if b := s.Stats().Bytes; b > logEntryBytes+compactMinCap*logItemBytes*4 {
		t.Fatalf("Bytes = %d after the log shrank to 2 entries", b)
	}
}

// TestSweepBoundary checks, within one shard, that Sweep drops a state at
// its ExpiresAt exactly and keeps one expiring a nanosecond later.
func TestSweepBoundary(t *testing.T) {
	s := newStore(t, Config{Shards: 1})
	l := lim(bucket.TokenBucket, 10, time.Second)
	if _, err := s.Take(1, l, t0, 1); err != nil { // full at t0+100ms
		t.Fatal(err)
	}
	if _, err := s.Take(2, l, t0+1, 1); err != nil { // full at t0+100ms+1ns
		t.Fatal(err)
	}
	if n := s.Sweep(t0 + 100*ms - 1); n != 0 {
		t.Fatalf("Sweep before any expiry dropped %d", n)
	}
	if n := s.Sweep(t0 + 100*ms); n != 1 {
		t.Fatalf("Sweep at the first expiry dropped %d, want 1", n)
	}
	if _, ok := s.shards[0].tokens[2]; !ok {
		t.Fatal("the live state was dropped")
	}
	if n := s.Sweep(t0 + 100*ms + 1); n != 1 {
		t.Fatalf("Sweep at the second expiry dropped %d, want 1", n)
	}
}

// TestSweepShrinksMaps checks that a sweep which leaves less than a quarter
// of a large map rebuilds it (Go maps never shrink) and keeps the survivors.
func TestSweepShrinksMaps(t *testing.T) {
	s := newStore(t, Config{Shards: 1})
	l := lim(bucket.TokenBucket, 10, time.Second)
	for k := uint64(0); k < 4000; k++ {
		cost := int64(1) // full at t0+100ms
		if k%10 == 0 {
			cost = 10 // full at t0+1s
		}
		if _, err := s.Take(k, l, t0, cost); err != nil {
			t.Fatal(err)
		}
	}
	before := reflect.ValueOf(s.shards[0].tokens).UnsafePointer()
	if n := s.Sweep(t0 + 500*ms); n != 3600 {
		t.Fatalf("Sweep dropped %d, want 3600", n)
	}
	if after := reflect.ValueOf(s.shards[0].tokens).UnsafePointer(); after == before {
		t.Fatal("the map was not rebuilt")
	}
	if got := len(s.shards[0].tokens); got != 400 {
		t.Fatalf("%d survivors, want 400", got)
	}
	for k := uint64(0); k < 4000; k += 10 {
		if res, _ := s.Take(k, l, t0+500*ms, 0); res.Remaining != 5 {
			t.Fatalf("key %d: %+v after the rebuild", k, res)
		}
	}
	checkCounters(t, s)
}

func TestRenew(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	l := lim(bucket.Concurrency, 3, 0)
	id, _, err := s.Acquire(1, l, t0, 1, 10*time.Second)
	if err != nil || id.IsZero() {
		t.Fatal(id, err)
	}
	if _, _, err := s.Acquire(1, l, t0, 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Renew at t0+9s for 10s more, growing to 2 units (its own unit does
	// not count against it): 3 of 3 in use.
	ok, res, err := s.Renew(1, l, t0+9*sec, 2, 10*time.Second, id)
	if err != nil || !ok || res.Remaining != 0 {
		t.Fatalf("renew: %v %+v %v", ok, res, err)
	}
	// At t0+15s the other lease lapsed and the renewed one is live.
	if _, res, _ := s.Acquire(1, l, t0+15*sec, 0, 0); res.Remaining != 1 {
		t.Fatalf("usage at t0+15s: %+v, want 1 remaining", res)
	}
	// A cost above the limit is an error and keeps the lease as it was.
	if ok, _, err := s.Renew(1, l, t0+15*sec, 4, 10*time.Second, id); ok || err == nil {
		t.Fatalf("renew to 4 of 3: %v %v, want an error", ok, err)
	}
	if _, _, err := s.Acquire(1, l, t0+15*sec, 1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ok, res, err := s.Renew(1, l, t0+15*sec, 3, 10*time.Second, id); ok || err != nil || res.Allowed {
		t.Fatalf("renew to 3 with another unit held: %v %+v %v, want denied", ok, res, err)
	}
	if _, res, _ := s.Acquire(1, l, t0+15*sec, 0, 0); res.Remaining != 0 {
		t.Fatalf("usage after a denied renewal: %+v, want 0 remaining", res)
	}
	// An unknown or lapsed lease is not renewed, and nothing is created.
	if ok, _, err := s.Renew(1, l, t0+15*sec, 1, time.Second, LeaseID{ID: 999}); ok || err != nil {
		t.Fatalf("renew of an unknown lease: %v %v", ok, err)
	}
	if ok, _, err := s.Renew(1, l, t0+20*sec, 1, time.Second, id); ok || err != nil {
		t.Fatalf("renew of a lapsed lease: %v %v", ok, err)
	}
	if ok, _, err := s.Renew(2, l, t0, 1, time.Second, id); ok || err != nil {
		t.Fatalf("renew on an absent key: %v %v", ok, err)
	}
	if _, res, _ := s.Acquire(1, l, t0+20*sec, 0, 0); res.Remaining != 2 {
		t.Fatalf("usage at t0+20s: %+v, want 2 remaining", res)
	}
	if _, _, err := s.Renew(1, lim(bucket.TokenBucket, 3, time.Second), t0, 1, time.Second, id); !errors.Is(err, ErrWrongAlgorithm) {
		t.Fatalf("Renew(token) = %v", err)
	}
	checkCounters(t, s)
	if st := s.Stats(); st.Keys != 1 {
		t.Fatalf("Keys = %d, want 1", st.Keys)
	}
}
