package limiter

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// A state taken out of the store to be handed off is always in sight of a
// fetch: in the store, or travelling, never in neither. A fetch that
// found it in neither would have its caller count the key afresh (the
// fault test's graceful restarts: a restarted node fetched a key 1ms after
// the handoff took it out of the store, and counted it from nothing).
func TestTravellingStateIsNeverOutOfSight(t *testing.T) {
	l, err := New(Config{NodeName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lim := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Hour}
	now := time.Now().UnixNano()
	const key = 42
	if _, err := l.store.Take(key, lim, now, 60); err != nil {
		t.Fatal(err)
	}
	var missed, looks, rounds atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			looks.Add(1)
			// As FetchMoved looks: the store, the states travelling, and
			// the store again (a failed push puts its states back before
			// it stops recording them as travelling). A look that spans
			// two rounds may see each place between two moves.
			r := rounds.Load()
			if !l.store.Has(now, key) && !l.transit.has(key) && !l.store.Has(now, key) && rounds.Load() == r {
				missed.Add(1)
			}
		}
	})
	for i := 0; i < 20000; i++ {
		entries, travel := l.extractTravelling(now, []uint64{key})
		if len(entries) != 1 {
			t.Fatalf("round %d: extracted %d states, want 1", i, len(entries))
		}
		l.putBack(entries) // as a failed push does
		l.transit.done(travel)
		rounds.Add(1)
	}
	close(stop)
	wg.Wait()
	if n := missed.Load(); n > 0 {
		t.Fatalf("the state was out of sight in %d of %d looks", n, looks.Load())
	}
}

// Two pushes of one key may overlap: a handoff takes the state out, a
// fetch brings another back meanwhile, and a pass-on sends that one too.
// The first push to return leaves the other's state in sight, so a fetch
// then still finds it (the fault test's graceful restarts: a restarted
// node fetched a key 1ms after the first push returned, found nothing
// anywhere while the second was in flight, and counted it afresh).
func TestOverlappingPushesKeepEachOthersStates(t *testing.T) {
	l, err := New(Config{NodeName: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lim := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Hour}
	now := time.Now().UnixNano()
	const key = 42
	take := func(cost int64) {
		t.Helper()
		if _, err := l.store.Take(key, lim, now, cost); err != nil {
			t.Fatal(err)
		}
	}
	take(60)
	first, p1 := l.extractTravelling(now, []uint64{key})
	take(30) // the state a fetch brought back, say
	second, p2 := l.extractTravelling(now, []uint64{key})
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("extracted %d and %d states, want 1 and 1", len(first), len(second))
	}
	l.transit.done(p1)
	got := l.transit.appendMissing([]uint64{key}, nil)
	if len(got) != 1 || got[0].Token != second[0].Token {
		t.Fatalf("after the first push returned: travelling %+v, want the second push's state %+v", got, second)
	}
	l.transit.done(p2)
	if l.transit.has(key) {
		t.Fatal("after both pushes returned: still travelling")
	}
}
