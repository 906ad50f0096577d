package store

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// changedKeys drains s's change log and returns the keys exported, sorted.
func changedKeys(s *Store, now int64) []uint64 {
	var keys []uint64
	s.ExportChanged(now, func(e Entry) bool {
		keys = append(keys, e.Key)
		return true
	})
	slices.Sort(keys)
	return keys
}

func TestChangesStepTable(t *testing.T) {
	tok := lim(bucket.TokenBucket, 10, time.Hour)
	win := lim(bucket.FixedWindow, 10, time.Hour)
	conc := lim(bucket.Concurrency, 2, 0)
	s := newStore(t, Config{Shards: 4, TrackChanges: true})
	steps := []struct {
		do   func()
		want []uint64 // keys ExportChanged hands over after do
	}{
		{func() {}, nil},
		// A take that inserts, and one that changes, are logged once.
		{func() { s.Take(1, tok, t0, 1); s.Take(1, tok, t0, 1); s.Take(2, win, t0, 3) }, []uint64{1, 2}},
		// Drained: nothing until the next write.
		{func() {}, nil},
		// Reads and denials write nothing.
		{func() { s.Take(1, tok, t0, 0); s.Take(1, tok, t0, 11); s.Take(3, tok, t0, 0) }, nil},
		// Grants, give-backs, leases and imports are writes.
		{func() { s.TakeUpTo(4, tok, t0, 5) }, []uint64{4}},
		{func() { s.GiveBack(4, tok, t0, 2) }, []uint64{4}},
		{func() { s.Acquire(5, conc, t0, 1, time.Minute) }, []uint64{5}},
		{func() {
			s.Import(Entry{Key: 6, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0 + int64(time.Minute)}}, t0)
		}, []uint64{6}},
		// Interleaved keys are each handed over once.
		{func() { s.Take(1, tok, t0, 1); s.Take(2, win, t0, 1); s.Take(1, tok, t0, 1) }, []uint64{1, 2}},
	}
	for i, st := range steps {
		st.do()
		if got := changedKeys(s, t0); !slices.Equal(got, st.want) {
			t.Errorf("step %d: changed %v, want %v", i, got, st.want)
		}
	}
}

// A key written then deleted (refilled) before the export is not handed
// over: nothing of it is left to copy.
func TestChangesSkipGoneKeys(t *testing.T) {
	tok := lim(bucket.TokenBucket, 10, time.Second)
	s := newStore(t, Config{Shards: 1, TrackChanges: true})
	s.Take(1, tok, t0, 1)
	if got := changedKeys(s, t0+2*sec); len(got) != 0 {
		t.Errorf("changed %v after the state expired, want none", got)
	}
}

// A shard whose log overflows hands over all of its live states, and the
// log's memory stays bounded.
func TestChangesOverflow(t *testing.T) {
	tok := lim(bucket.TokenBucket, 10, time.Hour)
	s := newStore(t, Config{Shards: 1, TrackChanges: true, MaxChanges: 16})
	const n = 100
	for k := uint64(1); k <= n; k++ {
		s.Take(k, tok, t0, 1)
	}
	if l := len(s.changes[0].changes); l > 16 {
		t.Fatalf("log holds %d keys, want at most 16", l)
	}
	if got := changedKeys(s, t0); len(got) != n {
		t.Fatalf("overflowed shard handed over %d keys, want all %d", len(got), n)
	}
	if got := changedKeys(s, t0); len(got) != 0 {
		t.Errorf("second export handed over %d keys, want 0", len(got))
	}
	s.MarkAllChanged()
	if got := changedKeys(s, t0); len(got) != n {
		t.Errorf("after MarkAllChanged: %d keys, want %d", len(got), n)
	}
}

func TestChangesOffByDefault(t *testing.T) {
	s := newStore(t, Config{Shards: 4})
	s.Take(1, lim(bucket.TokenBucket, 10, time.Hour), t0, 1)
	s.MarkAllChanged()
	if got := changedKeys(s, t0); len(got) != 0 {
		t.Errorf("a store without TrackChanges handed over %v", got)
	}
	if _, err := New(Config{MaxChanges: -1}); err == nil {
		t.Error("MaxChanges -1 accepted")
	}
}

// BenchmarkTakeTokenTracked is BenchmarkTakeToken with TrackChanges on and
// the log drained every 1,600 takes (a node's 50 ms of 32k checks/s), to
// compare with BenchmarkTakeToken: the cost of logging writes for
// replication, the drain included.
func BenchmarkTakeTokenTracked(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s, keys := benchKeysIn(b, n, Config{TrackChanges: true})
			s.ExportChanged(t0, func(Entry) bool { return true })
			mask := n - 1
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Take(keys[i&mask], benchLimit, t0, 1); err != nil {
					b.Fatal(err)
				}
				if i%1600 == 1599 {
					s.ExportChanged(t0, func(Entry) bool { return true })
				}
			}
		})
	}
}

// Replace puts the state it is given, even a less restrictive one than the
// key's (an owner's credit), where Import keeps the more restrictive.
func TestReplace(t *testing.T) {
	s := newStore(t, Config{Shards: 1})
	high := Entry{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0 + 10*sec}}
	low := Entry{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0 + 5*sec}}
	steps := []struct {
		put  func(Entry, int64) error
		e    Entry
		want int64
	}{
		{s.Import, high, high.Token.TAT},
		{s.Import, low, high.Token.TAT},
		{s.Replace, low, low.Token.TAT},
		{s.Replace, high, high.Token.TAT},
	}
	for i, st := range steps {
		if err := st.put(st.e, t0); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := s.Copy(t0, []uint64{1})
		if len(got) != 1 || got[0].Token.TAT != st.want {
			t.Errorf("step %d: state %+v, want TAT %d", i, got, st.want)
		}
	}
	if err := s.Replace(Entry{Key: 2, Algorithm: bucket.Algorithm(99)}, t0); err == nil {
		t.Error("Replace took a state of an unknown algorithm")
	}
}
