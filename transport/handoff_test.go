package transport

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/store"
)

func TestPeerFetchAndHandoff(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	t0 := time.Now().UnixNano()
	var live []store.Entry
	var hashes []uint64
	for _, e := range sampleEntries(t0) {
		hashes = append(hashes, e.Key)
		if e.ExpiresAt() > t0 {
			live = append(live, e)
		}
		if err := fake.st.Import(e, t0); err != nil {
			t.Fatal(err)
		}
	}
	if len(live) != int(bucket.LastAlgorithm) {
		t.Fatalf("%d live sample entries, want one per algorithm", len(live))
	}
	got, err := c.Fetch(ctx, m, append(hashes, 12345))
	if err != nil {
		t.Fatal(err)
	}
	byKey := func(a, b store.Entry) int {
		if a.Key < b.Key {
			return -1
		}
		if a.Key > b.Key {
			return 1
		}
		return 0
	}
	slices.SortFunc(got, byKey)
	if !reflect.DeepEqual(got, live) {
		t.Errorf("fetched\n %+v\nwant\n %+v", got, live)
	}
	if again, err := c.Fetch(ctx, m, hashes); err != nil || len(again) != 0 {
		t.Errorf("second fetch = %v, %v; want nothing (moved)", again, err)
	}

	if err := c.Handoff(ctx, m, live, []int{3, 7}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	hs := slices.Clone(fake.handoffs)
	fake.mu.Unlock()
	if len(hs) != 1 || !reflect.DeepEqual(hs[0].entries, live) || !slices.Equal(hs[0].done, []int{3, 7}) {
		t.Errorf("handoffs = %+v, want the 5 entries with partitions [3 7]", hs)
	}
	// The states are back in the store, so a fetch finds them again.
	if back, err := c.Fetch(ctx, m, hashes); err != nil || len(back) != len(live) {
		t.Errorf("fetch after handoff = %d entries, %v; want %d", len(back), err, len(live))
	}
}

// A Fetch answer may hold a key more than once (its state and a copy on
// its way to a new owner): every copy reaches the caller, who merges them;
// a state of a key not asked is dropped.
func TestPeerFetchKeepsCopiesOfAKey(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	t0 := time.Now().UnixNano()
	var e store.Entry
	for _, s := range sampleEntries(t0) {
		if s.ExpiresAt() > t0 {
			e = s
			break
		}
	}
	own, copy1, copy2, other := e, e, e, e
	own.Key, copy1.Key, copy2.Key, other.Key = 7, 7, 7, 42
	if err := fake.st.Import(own, t0); err != nil {
		t.Fatal(err)
	}
	fake.extra = []store.Entry{copy1, copy2, other}
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	entries, err := c.Fetch(ctx, m, []uint64{7})
	if err != nil {
		t.Fatalf("Fetch: %v, want the three states of key 7", err)
	}
	if len(entries) != 3 {
		t.Fatalf("Fetch = %d states, want 3 (key 7 three times, key 42 dropped)", len(entries))
	}
	for _, got := range entries {
		if got.Key != 7 {
			t.Errorf("Fetch gave a state of key %d, not asked", got.Key)
		}
	}
}

// Replicate carries every algorithm's state to the heir's AcceptReplicas,
// never to AcceptHandoff.
func TestPeerReplicate(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now().UnixNano()
	var live []store.Entry
	for _, e := range sampleEntries(t0) {
		if e.ExpiresAt() > t0 {
			live = append(live, e)
		}
	}
	if err := c.Replicate(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Replicate(ctx, m, live); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if !reflect.DeepEqual(fake.replicas, live) || len(fake.handoffs) != 0 || fake.lastFrom != "n1" {
		t.Errorf("replicas %+v (from %q), handoffs %d; want the %d entries from n1 and no handoff", fake.replicas, fake.lastFrom, len(fake.handoffs), len(live))
	}
}

func TestPeerHandoffSplitsLargeBatches(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t0 := time.Now().UnixNano()
	entries := make([]store.Entry, 120)
	for i := range entries {
		log := make([]bucket.LogEntry, 1000)
		for j := range log {
			log[j] = bucket.LogEntry{At: t0 - int64(len(log)-j), Cost: 1}
		}
		entries[i] = store.Entry{Key: uint64(i + 1), Algorithm: bucket.SlidingLog, Period: int64(time.Hour), Log: bucket.LogState{Entries: log}}
	}
	if err := c.Handoff(ctx, m, entries, []int{1}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.handoffs) < 2 {
		t.Fatalf("%d Handoff RPCs for ~2.4 MB of states, want several", len(fake.handoffs))
	}
	var all []store.Entry
	for i, h := range fake.handoffs {
		last := i == len(fake.handoffs)-1
		if last != (len(h.done) > 0) {
			t.Errorf("handoff %d/%d has partitions %v: want them on the last RPC only", i, len(fake.handoffs), h.done)
		}
		all = append(all, h.entries...)
	}
	if !reflect.DeepEqual(all, entries) {
		t.Errorf("received %d entries, not the %d sent in order", len(all), len(entries))
	}
}

func TestPeerFetchConcurrent(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{MaxInflight: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now().UnixNano()
	const callers, per = 16, 4
	for k := range callers * per {
		e := store.Entry{Key: uint64(k + 1), Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0 + int64(time.Hour) + int64(k)}}
		if err := fake.st.Import(e, t0); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hashes := make([]uint64, per)
			for j := range hashes {
				hashes[j] = uint64(i*per + j + 1)
			}
			got, err := c.Fetch(ctx, m, hashes)
			if err != nil {
				t.Error(err)
				return
			}
			if len(got) != per {
				t.Errorf("caller %d got %d entries, want %d", i, len(got), per)
			}
			for _, e := range got {
				if !slices.Contains(hashes, e.Key) || e.Token.TAT != t0+int64(time.Hour)+int64(e.Key-1) {
					t.Errorf("caller %d got %+v, not one of its own", i, e)
				}
			}
		}()
	}
	wg.Wait()
}

// A token bucket's debt (a record among its reservations) crosses a Fetch
// and a Handoff over real gRPC unchanged, and the receiver applies it: a
// check under the settling limit waits out the debt.
func TestPeerHandoffCarriesTokenDebt(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now().UnixNano()
	l := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: time.Hour} // 6 minutes a token
	tau := int64(time.Hour)
	e := store.Entry{Key: 42, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: t0 + tau},
		Reservations: []bucket.Reservation{bucket.TokenDebt{Capacity: 10, Interval: tau / 10, Until: t0 + 2*tau}.Record()}}
	if err := fake.st.Import(e, t0); err != nil {
		t.Fatal(err)
	}
	got, err := c.Fetch(ctx, m, []uint64{42})
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], e) {
		t.Fatalf("fetched %+v %v, want %+v", got, err, e)
	}
	if err := c.Handoff(ctx, m, got, nil); err != nil {
		t.Fatal(err)
	}
	res, err := fake.st.Take(42, l, t0, 1)
	if want := time.Duration(tau + tau/10); err != nil || res.Allowed || res.RetryAfter != want {
		t.Fatalf("check after the handoff back: %+v %v, want denied for the debt and a unit (%v)", res, err, want)
	}
}
