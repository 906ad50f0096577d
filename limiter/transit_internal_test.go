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
		entries := l.extractTravelling(now, []uint64{key})
		if len(entries) != 1 {
			t.Fatalf("round %d: extracted %d states, want 1", i, len(entries))
		}
		l.putBack(entries) // as a failed push does
		l.transit.done(entries)
		rounds.Add(1)
	}
	close(stop)
	wg.Wait()
	if n := missed.Load(); n > 0 {
		t.Fatalf("the state was out of sight in %d of %d looks", n, looks.Load())
	}
}
