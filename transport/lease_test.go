package transport

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/store"
)

func TestPeerAcquireRelease(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	item := limiter.Forwarded{Hash: 7, Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}, Cost: 1}
	var ids []store.LeaseID
	for i := range 2 {
		a, id, err := c.Acquire(ctx, m, 1, item, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Allowed || id.IsZero() || a.Remaining != int64(1-i) {
			t.Fatalf("acquire %d = %+v id %v, want allowed with %d remaining", i, a, id, 1-i)
		}
		ids = append(ids, id)
	}
	fake.mu.Lock()
	from, ttl, hops := fake.lastFrom, fake.lastTTL, fake.lastHops
	fake.mu.Unlock()
	if from != "n1" || ttl != time.Minute || hops != 1 {
		t.Errorf("server saw from %q ttl %v hops %d, want n1, 1m, 1", from, ttl, hops)
	}
	if a, id, err := c.Acquire(ctx, m, 0, item, time.Minute); err != nil || a.Allowed || !id.IsZero() {
		t.Errorf("third acquire = %+v id %v err %v, want denied", a, id, err)
	}
	if a, ok, err := c.Release(ctx, m, 0, item, ids[0]); err != nil || !ok || a.Remaining != 1 {
		t.Errorf("release = %+v %v %v, want released with 1 remaining", a, ok, err)
	}
	if _, ok, err := c.Release(ctx, m, 0, item, ids[0]); err != nil || ok {
		t.Errorf("second release = %v %v, want not released", ok, err)
	}
	// The other lease is released only with its whole ID, and its key.
	guess := ids[1]
	guess.Tag ^= 1
	other := item
	other.Hash = 9
	for _, tc := range []struct {
		it limiter.Forwarded
		id store.LeaseID
	}{{item, guess}, {item, store.LeaseID{ID: ids[1].ID}}, {other, ids[1]}} {
		if a, ok, err := c.Release(ctx, m, 0, tc.it, tc.id); err != nil || ok {
			t.Errorf("release of %v on key %d = %+v %v %v, want not released", tc.id, tc.it.Hash, a, ok, err)
		}
	}
	if a, ok, err := c.Release(ctx, m, 0, item, ids[1]); err != nil || !ok || a.Remaining != 2 {
		t.Errorf("release with the whole ID = %+v %v %v, want released, 2 remaining", a, ok, err)
	}
	// A per-item error comes back in the answer, not as a call error.
	wrong := limiter.Forwarded{Hash: 8, Limit: tbLimit(2), Cost: 1}
	if a, _, err := c.Acquire(ctx, m, 0, wrong, time.Minute); err != nil || a.Err == nil || a.Allowed {
		t.Errorf("acquire on a token bucket = %+v err %v, want an answer error", a, err)
	}
}
