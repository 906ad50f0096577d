package store

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// TestHandoffRoundTrip moves keys at 60/100 from store a to store b with
// Export, Import and DeleteIf, for every algorithm, and checks that b
// continues exactly where a was.
func TestHandoffRoundTrip(t *testing.T) {
	a := newStore(t, Config{Shards: 64})
	b := newStore(t, Config{Shards: 32}) // a different sharding on purpose
	now := t0 + 10*sec
	const moving, staying = 1000, 2000 // keys 1000..1004 move, 2000..2004 stay
	for i := uint64(0); i < 5; i++ {
		for _, key := range []uint64{moving + i, staying + i} {
			for _, l := range takeLimits {
				if res, err := a.Take(key, l, now, 40); err != nil || res.Remaining != 60 {
					t.Fatalf("%v: %+v %v", l.Algorithm, res, err)
				}
			}
		}
	}
	cl := lim(bucket.Concurrency, 100, 0)
	leaseID, res, err := a.Acquire(moving, cl, now, 40, time.Minute)
	if err != nil || !res.Allowed {
		t.Fatalf("acquire: %+v %v", res, err)
	}
	isMoving := func(k uint64) bool { return k >= moving && k < staying }
	var exported []Entry
	a.Export(now, isMoving, func(e Entry) bool {
		exported = append(exported, e)
		if err := b.Import(e, now); err != nil {
			t.Fatalf("import %+v: %v", e, err)
		}
		return true
	})
	if want := 5*len(takeLimits) + 1; len(exported) != want {
		t.Fatalf("exported %d entries, want %d", len(exported), want)
	}
	if n := a.DeleteIf(isMoving); n != len(exported) {
		t.Fatalf("DeleteIf removed %d, want %d", n, len(exported))
	}
	checkCounters(t, a)
	checkCounters(t, b)
	if ka, kb := a.Stats().Keys, b.Stats().Keys; ka != 5*int64(len(takeLimits)) || kb != int64(len(exported)) {
		t.Fatalf("keys: a %d b %d", ka, kb)
	}
	for i := uint64(0); i < 5; i++ {
		for _, l := range takeLimits {
			if res, err := b.Take(moving+i, l, now, 0); err != nil || res.Remaining != 60 {
				t.Fatalf("%v on b: %+v %v, want 60 remaining", l.Algorithm, res, err)
			}
			if res, err := a.Take(moving+i, l, now, 0); err != nil || res.Remaining != 100 {
				t.Fatalf("%v on a after DeleteIf: %+v %v, want full", l.Algorithm, res, err)
			}
			if res, err := a.Take(staying+i, l, now, 0); err != nil || res.Remaining != 60 {
				t.Fatalf("%v staying key on a: %+v %v", l.Algorithm, res, err)
			}
			// b enforces the limit from where a left it.
			if res, _ := b.Take(moving+i, l, now, 61); res.Allowed {
				t.Fatalf("%v on b admitted 61 of 60 remaining", l.Algorithm)
			}
			if res, _ := b.Take(moving+i, l, now, 60); !res.Allowed {
				t.Fatalf("%v on b denied 60 of 60 remaining", l.Algorithm)
			}
		}
	}
	// The lease moved with its ID: b can release it.
	if _, res, _ := b.Acquire(moving, cl, now, 0, 0); res.Remaining != 60 {
		t.Fatalf("leases on b: %+v, want 60 remaining", res)
	}
	if ok, res, err := b.Release(moving, cl, now, leaseID); err != nil || !ok || res.Remaining != 100 {
		t.Fatalf("release on b: %v %+v %v", ok, res, err)
	}
	checkCounters(t, b)
}

func TestExportSkipsExpiredAndStops(t *testing.T) {
	s := newStore(t, Config{Shards: 8})
	l := lim(bucket.TokenBucket, 10, time.Second)
	for k := uint64(1); k <= 20; k++ {
		cost := int64(1) // full again at t0+100ms
		if k%2 == 0 {
			cost = 10 // full again at t0+1s
		}
		if _, err := s.Take(k, l, t0, cost); err != nil {
			t.Fatal(err)
		}
	}
	var keys []uint64
	s.Export(t0+500*ms, nil, func(e Entry) bool {
		if e.Algorithm != bucket.TokenBucket || e.Token.TAT != t0+sec {
			t.Fatalf("exported %+v", e)
		}
		keys = append(keys, e.Key)
		return true
	})
	slices.Sort(keys)
	if want := []uint64{2, 4, 6, 8, 10, 12, 14, 16, 18, 20}; !slices.Equal(keys, want) {
		t.Fatalf("exported keys %v, want the live ones %v", keys, want)
	}
	calls := 0
	s.Export(t0, nil, func(Entry) bool { calls++; return calls < 3 })
	if calls != 3 {
		t.Fatalf("fn called %d times after returning false on the 3rd", calls)
	}
}

// TestExportCopies checks that exported slices do not alias the store, and
// that fn may call the store (no lock is held while it runs).
func TestExportCopies(t *testing.T) {
	s := newStore(t, Config{Shards: 1})
	l := lim(bucket.SlidingLog, 10, time.Second)
	if _, err := s.Take(1, l, t0, 3); err != nil {
		t.Fatal(err)
	}
	s.Export(t0, nil, func(e Entry) bool {
		if e.Period != sec || len(e.Log.Entries) != 1 || e.Log.Entries[0] != (bucket.LogEntry{At: t0, Cost: 3}) {
			t.Fatalf("exported %+v", e)
		}
		e.Log.Entries[0].Cost = 0
		if _, err := s.Take(1, l, t0, 1); err != nil { // would deadlock under the lock
			t.Fatal(err)
		}
		return true
	})
	if res, _ := s.Take(1, l, t0, 0); res.Remaining != 6 {
		t.Fatalf("remaining %d, want 6: the export aliased the store", res.Remaining)
	}
}

func TestImportMergesConservatively(t *testing.T) {
	now := t0 + 10*sec
	for _, l := range takeLimits {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			a := newStore(t, Config{Shards: 4})
			b := newStore(t, Config{Shards: 4})
			// a spent 30, b spent 60 at another instant of the window.
			if _, err := a.Take(5, l, now, 30); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Take(5, l, now+sec, 60); err != nil {
				t.Fatal(err)
			}
			var got []Entry
			b.Export(now+sec, nil, func(e Entry) bool { got = append(got, e); return true })
			a.Export(now+sec, nil, func(e Entry) bool { got = append(got, e); return true })
			// Merging b's state into a and a's into b: both end at least
			// as restrictive as the more used one.
			if err := a.Import(got[0], now+sec); err != nil {
				t.Fatal(err)
			}
			if err := b.Import(got[1], now+sec); err != nil {
				t.Fatal(err)
			}
			for name, s := range map[string]*Store{"a": a, "b": b} {
				res, err := s.Take(5, l, now+sec, 0)
				if err != nil || res.Remaining > 40 {
					t.Fatalf("%s after merge: %+v %v, want <= 40 remaining", name, res, err)
				}
				if s.Stats().Keys != 1 {
					t.Fatalf("%s has %d keys", name, s.Stats().Keys)
				}
				checkCounters(t, s)
			}
			// Importing a store's own state again changes nothing.
			before, _ := a.Take(5, l, now+sec, 0)
			a.Export(now+sec, nil, func(e Entry) bool {
				if err := a.Import(e, now+sec); err != nil {
					t.Fatal(err)
				}
				return true
			})
			if after, _ := a.Take(5, l, now+sec, 0); after != before {
				t.Fatalf("self-import changed %+v to %+v", before, after)
			}
			checkCounters(t, a)
		})
	}
}

func TestImportEdgeCases(t *testing.T) {
	s := newStore(t, Config{Shards: 4, MaxBytes: 2 * tokenEntryBytes})
	live := Entry{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0 + sec}}
	if err := s.Import(Entry{Key: 9, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0}}, t0); err != nil {
		t.Fatalf("expired entry: %v", err)
	}
	if err := s.Import(Entry{Key: 9, Algorithm: bucket.FixedWindow, Window: bucket.WindowState{Start: t0, Expires: t0 + sec}}, t0); err != nil {
		t.Fatalf("empty window: %v", err)
	}
	if s.Stats().Keys != 0 {
		t.Fatal("an entry equal to the zero state was imported")
	}
	if err := s.Import(Entry{Key: 9, Algorithm: 0}, t0); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("unknown algorithm: %v", err)
	}
	logEntry := Entry{Key: 9, Algorithm: bucket.SlidingLog, Log: bucket.LogState{Entries: []bucket.LogEntry{{At: t0, Cost: 1}}}}
	if err := s.Import(logEntry, t0); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("log without period: %v", err)
	}
	for k := uint64(1); k <= 2; k++ {
		e := live
		e.Key = k
		if err := s.Import(e, t0); err != nil {
			t.Fatal(err)
		}
	}
	e := live
	e.Key = 3
	if err := s.Import(e, t0); !errors.Is(err, ErrFull) {
		t.Fatalf("import of a new key into a full store: %v", err)
	}
	if st := s.Stats(); st.Refused != 1 || st.Keys != 2 {
		t.Fatalf("Stats = %+v", st)
	}
	// Merging into an existing key is not refused; the later TAT wins.
	e.Key, e.Token.TAT = 1, t0+2*sec
	if err := s.Import(e, t0); err != nil {
		t.Fatalf("import into an existing key when full: %v", err)
	}
	e.Token.TAT = t0 + 500*ms
	if err := s.Import(e, t0); err != nil {
		t.Fatal(err)
	}
	if got := s.shardOf(1).tokens[1].TAT; got != t0+2*sec {
		t.Fatalf("TAT = %d, want the larger t0+2s", got-t0)
	}
	checkCounters(t, s)
}

func TestMergeWindow(t *testing.T) {
	w := func(start, expires, prev, cur int64) bucket.WindowState {
		return bucket.WindowState{Start: start, Expires: expires, Prev: prev, Cur: cur}
	}
	for _, tc := range []struct {
		name    string
		a, b    bucket.WindowState
		sliding bool
		want    bucket.WindowState
	}{
		{"same fixed window", w(0, 10, 0, 3), w(0, 10, 0, 7), false, w(0, 10, 0, 7)},
		{"same sliding window", w(0, 20, 9, 3), w(0, 20, 4, 7), true, w(0, 20, 9, 7)},
		{"later fixed window wins", w(10, 20, 0, 1), w(0, 10, 0, 9), false, w(10, 20, 0, 1)},
		{"later wins either order", w(0, 10, 0, 9), w(10, 20, 0, 1), false, w(10, 20, 0, 1)},
		{"consecutive sliding carries cur", w(10, 30, 2, 1), w(0, 20, 0, 9), true, w(10, 30, 9, 1)},
		{"consecutive sliding keeps larger prev", w(10, 30, 8, 1), w(0, 20, 0, 5), true, w(10, 30, 8, 1)},
		{"distant sliding", w(20, 40, 0, 1), w(0, 20, 0, 9), true, w(20, 40, 0, 1)},
	} {
		if got := mergeWindow(tc.a, tc.b, tc.sliding); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestUnionLog(t *testing.T) {
	e := func(at, cost int64) bucket.LogEntry { return bucket.LogEntry{At: at, Cost: cost} }
	a := []bucket.LogEntry{e(1, 1), e(3, 2), e(5, 1)}
	b := []bucket.LogEntry{e(2, 4), e(3, 5), e(6, 1)}
	if got, want := unionLog(a, b), []bucket.LogEntry{e(1, 1), e(2, 4), e(3, 5), e(5, 1), e(6, 1)}; !slices.Equal(got, want) {
		t.Fatalf("union = %v, want %v", got, want)
	}
	if got, want := unionLog(b, a), []bucket.LogEntry{e(1, 1), e(2, 4), e(3, 5), e(5, 1), e(6, 1)}; !slices.Equal(got, want) {
		t.Fatalf("union = %v, want %v", got, want)
	}
	if got := unionLog(a, a); !slices.Equal(got, a) {
		t.Fatalf("union with itself = %v, want %v", got, a)
	}
	if got := unionLog(nil, b); !slices.Equal(got, b) {
		t.Fatalf("union with nothing = %v, want %v", got, b)
	}
	if got, want := liveLog([]bucket.LogEntry{e(1, 1), e(9, 2), e(11, 1)}, 10, 19), []bucket.LogEntry{e(11, 1)}; !slices.Equal(got, want) {
		t.Fatalf("liveLog = %v, want %v", got, want)
	}
}

func TestUnionLeases(t *testing.T) {
	a := []bucket.Lease{{ID: 1, Cost: 1, Expires: 50}, {ID: 2, Cost: 2, Expires: 5}, {ID: 3, Cost: 1, Expires: 30}}
	b := []bucket.Lease{{ID: 3, Cost: 4, Expires: 20}, {ID: 4, Cost: 1, Expires: 40}}
	want := []bucket.Lease{{ID: 3, Cost: 4, Expires: 30}, {ID: 4, Cost: 1, Expires: 40}, {ID: 1, Cost: 1, Expires: 50}}
	if got := unionLeases(a, b, 10); !slices.Equal(got, want) {
		t.Fatalf("union = %v, want %v", got, want)
	}
	if got := unionLeases(b, a, 10); !slices.Equal(got, want) {
		t.Fatalf("union in the other order = %v, want %v", got, want)
	}
}

func TestDeleteIf(t *testing.T) {
	s := newStore(t, Config{Shards: 16})
	for k := uint64(0); k < 100; k++ {
		for _, l := range takeLimits {
			if _, err := s.Take(k, l, t0, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k := uint64(0); k < 100; k++ {
		if _, _, err := s.Acquire(k, lim(bucket.Concurrency, 5, 0), t0, 1, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	kinds := len(takeLimits) + 1
	if n := s.DeleteIf(func(k uint64) bool { return k%4 == 0 }); n != 25*kinds {
		t.Fatalf("DeleteIf removed %d, want %d", n, 25*kinds)
	}
	if st := s.Stats(); st.Keys != 75*int64(kinds) {
		t.Fatalf("Keys = %d", st.Keys)
	}
	checkCounters(t, s)
	if n := s.DeleteIf(func(uint64) bool { return true }); n != 75*kinds {
		t.Fatalf("DeleteIf(all) removed %d", n)
	}
	if st := s.Stats(); st != (Stats{}) {
		t.Fatalf("Stats after deleting everything = %+v", st)
	}
	checkMapsFreed(t, s)
}

func TestImportMergesLeases(t *testing.T) {
	l := lim(bucket.Concurrency, 100, 0)
	a := newStore(t, Config{Shards: 4})
	b := newStore(t, Config{Shards: 4})
	idA, _, err := a.Acquire(5, l, t0, 30, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	idB, _, err := b.Acquire(5, l, t0, 60, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var fromB Entry
	b.Export(t0, nil, func(e Entry) bool { fromB = e; return true })
	for range 2 { // importing twice is the same as once
		if err := a.Import(fromB, t0+sec); err != nil {
			t.Fatal(err)
		}
	}
	if _, res, _ := a.Acquire(5, l, t0+sec, 0, 0); res.Remaining != 10 {
		t.Fatalf("after the merge: %+v, want 10 remaining", res)
	}
	for _, id := range []LeaseID{idA, idB} {
		if ok, _, _ := a.Release(5, l, t0+sec, id); !ok {
			t.Fatalf("lease %d not held after the merge", id)
		}
	}
	checkCounters(t, a)
	if a.Stats().Keys != 0 {
		t.Fatal("the key outlived its leases")
	}
}

// Extract moves one key's state out without scanning; Delete removes keys.
func TestExtractAndDelete(t *testing.T) {
	a := newStore(t, Config{})
	b := newStore(t, Config{})
	l := lim(bucket.TokenBucket, 100, time.Hour)
	for i := 0; i < 60; i++ {
		if _, err := a.Take(1, l, t0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Take(2, l, t0, 1); err != nil {
		t.Fatal(err)
	}
	if !a.Has(t0, 1) || a.Has(t0, 3) || a.Has(t0+2*3600*sec, 1) {
		t.Fatalf("Has(1), Has(3), Has(1) once expired: %v %v %v, want true false false",
			a.Has(t0, 1), a.Has(t0, 3), a.Has(t0+2*3600*sec, 1))
	}
	got := a.Extract(t0, []uint64{1, 3})
	if len(got) != 1 || got[0].Key != 1 || a.Has(t0, 1) {
		t.Fatalf("Extract: %+v, want the state of key 1 only", got)
	}
	if st := a.Stats(); st.Keys != 1 {
		t.Fatalf("after Extract: %d keys, want 1", st.Keys)
	}
	if err := b.Import(got[0], t0); err != nil {
		t.Fatal(err)
	}
	res, err := b.Take(1, l, t0, 0)
	if err != nil || res.Remaining != 40 {
		t.Fatalf("moved key: remaining %d (%v), want 40", res.Remaining, err)
	}
	if n := a.Delete([]uint64{2, 4}); n != 1 || a.Stats().Keys != 0 {
		t.Fatalf("Delete removed %d, keys left %d; want 1 and 0", n, a.Stats().Keys)
	}
}

// TakeUpTo grants what the bucket has, up to the ask, and nothing when empty.
func TestTakeUpTo(t *testing.T) {
	s := newStore(t, Config{})
	l := lim(bucket.TokenBucket, 10, time.Second)
	steps := []struct {
		at, most, want int64
	}{
		{t0, 4, 4},
		{t0, 100, 6},
		{t0, 3, 0},
		{t0 + 200*ms, 5, 2}, // 2 tokens refilled in 200ms
	}
	for i, st := range steps {
		got, res, err := s.TakeUpTo(7, l, st.at, st.most)
		if err != nil || got != st.want {
			t.Fatalf("step %d: granted %d (%v), want %d", i, got, err, st.want)
		}
		if got == 0 && (res.Allowed || res.RetryAfter <= 0) {
			t.Fatalf("step %d: empty bucket result %+v, want a deny with a retry-after", i, res)
		}
	}
	if _, _, err := s.TakeUpTo(7, lim(bucket.FixedWindow, 10, time.Second), t0, 1); !errors.Is(err, ErrWrongAlgorithm) {
		t.Fatalf("fixed window: %v, want ErrWrongAlgorithm", err)
	}
}

func TestGiveBack(t *testing.T) {
	s := newStore(t, Config{})
	l := lim(bucket.TokenBucket, 10, time.Second)
	if got, _, err := s.GiveBack(8, l, t0, 3); err != nil || got != 0 || s.Has(t0, 8) {
		t.Fatalf("unknown key: gave %d (%v), has %v; want nothing given and no state", got, err, s.Has(t0, 8))
	}
	steps := []struct {
		take, give, given, remaining int64
	}{
		{take: 6, give: 4, given: 4, remaining: 8},
		{give: 5, given: 2, remaining: 10}, // capped at capacity
		{take: 10, give: 10, given: 10, remaining: 10},
	}
	for i, st := range steps {
		if st.take > 0 {
			if got, _, err := s.TakeUpTo(8, l, t0, st.take); err != nil || got != st.take {
				t.Fatalf("step %d: took %d (%v), want %d", i, got, err, st.take)
			}
		}
		got, res, err := s.GiveBack(8, l, t0, st.give)
		if err != nil || got != st.given || res.Remaining != st.remaining {
			t.Fatalf("step %d: gave %d, remaining %d (%v); want %d, %d", i, got, res.Remaining, err, st.given, st.remaining)
		}
	}
	if _, _, err := s.GiveBack(8, lim(bucket.FixedWindow, 10, time.Second), t0, 1); !errors.Is(err, ErrWrongAlgorithm) {
		t.Fatalf("fixed window: %v, want ErrWrongAlgorithm", err)
	}
	if _, _, err := s.TakeUpTo(8, l, t0, 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GiveBack(8, l, t0, 11); !errors.Is(err, bucket.ErrCostExceedsCapacity) {
		t.Fatalf("give 11 of 10: %v, want ErrCostExceedsCapacity", err)
	}
}
