package persist

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/store"
)

// While a write is under way and MaxPending states wait already, Add waits
// for the write to take them (it is counted), then goes on: the pending
// set never grows past MaxPending plus one Add's states.
func TestWriterAddWaitsWhenFull(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := NewWriter(db, WriterConfig{Interval: time.Hour, MaxPending: 2, Clock: func() time.Time { return time.Unix(0, 1e12) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { w.Run(ctx, 0); close(ran) }()
	defer func() { cancel(); <-ran }()
	state := func(k uint64) []store.Entry {
		return []store.Entry{{Key: k, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: 2e12}}}
	}
	waitRunning(t, w)
	w.flushMu.Lock() // a write under way
	locked := true
	defer func() {
		if locked { // a failure below: let Run end
			w.flushMu.Unlock()
		}
	}()
	w.Add(state(1))
	w.Add(state(2)) // full: Run's Flush now waits for flushMu
	added := make(chan struct{})
	go func() { w.Add(state(3)); close(added) }()
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().FullWaits != 1 {
		if time.Now().After(deadline) {
			t.Fatal("Add did not wait for room")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-added:
		t.Fatal("Add went on while the pending set was full")
	default:
	}
	if p := w.Stats().Pending; p != 2 {
		t.Fatalf("%d pending while full, want 2", p)
	}
	w.flushMu.Unlock() // the write ends; the next takes the full set
	locked = false
	<-added
	// The third is then pending, or written by an early write that its
	// wait asked for: nothing is lost.
	for s := w.Stats(); s.Written < 2 || s.Written+uint64(s.Pending) != 3; s = w.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("after the write: %+v, want the full set written and the third state written or pending", s)
		}
		time.Sleep(time.Millisecond)
	}
}

// The pending set keeps each key and algorithm's latest state, whatever
// its record's length, and a failed write's states go back unless newer
// ones came meanwhile.
func TestPendingLatestWins(t *testing.T) {
	log := func(n int) store.Entry {
		e := store.Entry{Key: 7, Algorithm: bucket.SlidingLog, Period: 10e9}
		for i := range n {
			e.Log.Entries = append(e.Log.Entries, bucket.LogEntry{At: int64(i), Cost: 1})
		}
		return e
	}
	tok := func(k uint64, tat int64) store.Entry {
		return store.Entry{Key: k, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: tat}}
	}
	p := newPending(0)
	for _, e := range []store.Entry{tok(7, 1), log(1), tok(3, 1), log(3), tok(7, 2), log(2), tok(3, 5)} {
		p.put(e)
	}
	var got []store.Entry
	for _, r := range p.records() {
		e, err := DecodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	want := []store.Entry{tok(3, 5), tok(7, 2), log(2)}
	if len(got) != len(want) || p.len() != 3 {
		t.Fatalf("records %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Token != want[i].Token || len(got[i].Log.Entries) != len(want[i].Log.Entries) {
			t.Fatalf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	failed := p.records()
	q := newPending(0)
	q.put(tok(7, 9))
	q.putBack(failed)
	var back []store.Entry
	for _, r := range q.records() {
		e, _ := DecodeRecord(r)
		back = append(back, e)
	}
	if len(back) != 3 || back[1].Token.TAT != 9 || back[0].Token.TAT != 5 || len(back[2].Log.Entries) != 2 {
		t.Fatalf("after putBack: %+v, want key 3 at 5, key 7's token at its newer 9, its log of 2", back)
	}
}

// After a failed write, a full set does not make Add wait nor Run retry
// at once: the disk is retried at the interval, and replication goes on.
func TestWriterFailingDiskNoRetryLoop(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(db, WriterConfig{Interval: time.Hour, MaxPending: 1, Clock: func() time.Time { return time.Unix(0, 1e12) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { w.Run(ctx, 0); close(ran) }()
	defer func() { cancel(); <-ran }()
	state := func(k uint64) []store.Entry {
		return []store.Entry{{Key: k, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: 2e12}}}
	}
	waitRunning(t, w)
	db.Close() // every write fails from now on
	w.Add(state(1))
	deadline := time.Now().Add(10 * time.Second)
	for w.Stats().Failed == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the write to a closed file did not fail")
		}
		time.Sleep(time.Millisecond)
	}
	for k := uint64(2); k < 10; k++ {
		w.Add(state(k)) // full, but the disk is failing: no wait
	}
	time.Sleep(50 * time.Millisecond) // a window for a retry loop to show
	if s := w.Stats(); s.Writes != 1 || s.Pending != 9 || s.FullWaits != 0 {
		t.Fatalf("%+v: want 1 write, 9 states pending, no wait", s)
	}
}

// waitRunning waits until w.Run has started.
func waitRunning(t *testing.T, w *Writer) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		running := w.running
		w.mu.Unlock()
		if running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not start")
		}
		time.Sleep(time.Millisecond)
	}
}
