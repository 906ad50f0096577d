package store

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// Reset leaves each algorithm's key with the remaining asked for, at
// once and for the next take.
func TestResetEveryAlgorithm(t *testing.T) {
	cal := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Calendar: bucket.Month, Zone: time.UTC}
	for _, l := range []bucket.Limit{
		lim(bucket.TokenBucket, 10, time.Hour),
		{Algorithm: bucket.TokenBucket, Limit: 10, Period: time.Hour, Burst: 20},
		lim(bucket.FixedWindow, 10, time.Hour),
		lim(bucket.SlidingWindow, 10, time.Hour),
		lim(bucket.SlidingLog, 10, time.Hour),
		lim(bucket.FixedWindowHits, 10, time.Hour),
		cal,
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			s := newStore(t, Config{TrackChanges: true})
			capacity := l.Capacity()
			if _, err := s.Take(1, l, t0, capacity); err != nil {
				t.Fatal(err)
			}
			for _, want := range []int64{capacity, 0, 3, capacity - 1, capacity} {
				if err := s.Reset(1, l, t0+sec, want); err != nil {
					t.Fatalf("reset to %d: %v", want, err)
				}
				res, err := s.Take(1, l, t0+sec, 0)
				if err != nil || res.Remaining != want {
					t.Fatalf("after a reset to %d: %+v %v", want, res, err)
				}
			}
			if err := s.Reset(1, l, t0, capacity+1); err == nil {
				t.Fatal("a reset above the capacity passed")
			}
			if err := s.Reset(1, l, t0, -1); err == nil {
				t.Fatal("a negative reset passed")
			}
			if st := s.Stats(); st.Keys != 0 {
				t.Fatalf("a key reset to full is still stored: %+v", st)
			}
		})
	}
}

// A concurrency key resets only to full, which drops its leases.
func TestResetConcurrency(t *testing.T) {
	s := newStore(t, Config{})
	l := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 3}
	if _, _, err := s.Acquire(1, l, t0, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(1, l, t0, 1); err == nil {
		t.Fatal("a concurrency reset to 1 passed")
	}
	if err := s.Reset(1, l, t0, 3); err != nil {
		t.Fatal(err)
	}
	if _, res, err := s.Acquire(1, l, t0, 0, 0); err != nil || res.Remaining != 3 {
		t.Fatalf("after reset: %+v %v", res, err)
	}
}

// A key reset to full is exported as a tombstone (a zero entry that
// passes Validate), which Replace turns into a deletion on a replica; a
// reset to a remaining exports the new state. Other keys' states and the
// key's other algorithms are untouched.
func TestResetTombstone(t *testing.T) {
	owner := newStore(t, Config{TrackChanges: true})
	replica := newStore(t, Config{})
	tb, fw := lim(bucket.TokenBucket, 10, time.Hour), lim(bucket.FixedWindow, 10, time.Hour)
	for _, k := range []uint64{1, 2} {
		if _, err := owner.Take(k, tb, t0, 4); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := owner.Take(1, fw, t0, 4); err != nil {
		t.Fatal(err)
	}
	sync := func() []Entry {
		var got []Entry
		owner.ExportChanged(t0, func(e Entry) bool {
			got = append(got, e)
			if err := e.Validate(t0); err != nil {
				t.Fatalf("exported entry %+v: %v", e, err)
			}
			if err := replica.Replace(e, t0); err != nil {
				t.Fatal(err)
			}
			return true
		})
		return got
	}
	sync()
	if err := owner.Reset(1, tb, t0, 10); err != nil {
		t.Fatal(err)
	}
	got := sync()
	if len(got) != 2 {
		t.Fatalf("after a reset to full, exported %+v: want key 1's tombstone and its window", got)
	}
	if res, _ := replica.Take(1, tb, t0, 0); res.Remaining != 10 {
		t.Fatalf("the replica kept the reset token state: %d left", res.Remaining)
	}
	if res, _ := replica.Take(1, fw, t0, 0); res.Remaining != 6 {
		t.Fatalf("the replica's window of key 1: %d left, want 6", res.Remaining)
	}
	if res, _ := replica.Take(2, tb, t0, 0); res.Remaining != 6 {
		t.Fatalf("the replica's key 2: %d left, want 6", res.Remaining)
	}
	// A reset of a key with no state logs nothing.
	if err := owner.Reset(3, tb, t0, 10); err != nil {
		t.Fatal(err)
	}
	if got := sync(); len(got) != 0 {
		t.Fatalf("a reset of an absent key exported %+v", got)
	}
	if err := owner.Reset(2, tb, t0, 1); err != nil {
		t.Fatal(err)
	}
	sync()
	if res, _ := replica.Take(2, tb, t0, 0); res.Remaining != 1 {
		t.Fatalf("the replica after a reset to 1: %d left", res.Remaining)
	}
}

func TestTombstoneCodes(t *testing.T) {
	for a := bucket.TokenBucket; a <= bucket.LastAlgorithm; a++ {
		if got, ok := tombstoneOf(tombstone(a)); !ok || got != a {
			t.Fatalf("tombstone of %v decodes to %v %t", a, got, ok)
		}
	}
	for _, tat := range []int64{lookUp, 0, t0, tombstone(bucket.LastAlgorithm) + 1} {
		if _, ok := tombstoneOf(tat); ok {
			t.Fatalf("%d is a tombstone", tat)
		}
	}
}

// A reset right after another write of the key in the same interval (a
// window's take logs a lookup) still reaches the replica as a tombstone:
// a lookup stands for the key's writes, not for its deletions.
func TestResetAfterLookupInOneInterval(t *testing.T) {
	owner := newStore(t, Config{TrackChanges: true})
	replica := newStore(t, Config{})
	fw := lim(bucket.FixedWindow, 10, time.Hour)
	sync := func() {
		owner.ExportChanged(t0, func(e Entry) bool {
			if err := replica.Replace(e, t0); err != nil {
				t.Fatal(err)
			}
			return true
		})
	}
	if _, err := owner.Take(1, fw, t0, 4); err != nil {
		t.Fatal(err)
	}
	sync()
	if _, err := owner.Take(1, fw, t0, 2); err != nil {
		t.Fatal(err)
	}
	if err := owner.Reset(1, fw, t0, 10); err != nil {
		t.Fatal(err)
	}
	sync()
	if res, _ := replica.Take(1, fw, t0, 0); res.Remaining != 10 {
		t.Fatalf("the replica after a take and a reset in one interval: %d left, want 10 (reset)", res.Remaining)
	}
}
