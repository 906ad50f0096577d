package transport

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Peer/Admin over real gRPC: the client's inspect and reset reach the
// owner's service, and its answer (remaining, reset time) comes back.
func TestPeerAdmin(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "caller"})
	ctx := context.Background()
	lim := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: time.Hour}
	if _, err := fake.st.Take(7, lim, now(), 4); err != nil {
		t.Fatal(err)
	}
	info, err := c.Admin(ctx, m, 0, limiter.Forwarded{Hash: 7, Limit: lim}, limiter.AdminOp{})
	if err != nil || info.Remaining != 6 || info.Owner != "fake" || info.Now == 0 {
		t.Fatalf("inspect: %+v %v", info, err)
	}
	info, err = c.Admin(ctx, m, 0, limiter.Forwarded{Hash: 7, Limit: lim}, limiter.AdminOp{Reset: true, Remaining: 2})
	if err != nil || info.Remaining != 2 {
		t.Fatalf("reset to 2: %+v %v", info, err)
	}
	if info, err = c.Admin(ctx, m, 0, limiter.Forwarded{Hash: 7, Limit: lim}, limiter.AdminOp{Reset: true, Remaining: limiter.ResetFull}); err != nil || info.Remaining != 10 {
		t.Fatalf("reset to full: %+v %v", info, err)
	}
	// An owner's error comes back as an error, not a KeyInfo.
	if _, err := c.Admin(ctx, m, 0, limiter.Forwarded{Hash: 7, Limit: lim}, limiter.AdminOp{Reset: true, Remaining: 11}); err == nil {
		t.Fatal("a reset above the capacity passed")
	}
	if _, err := c.Admin(ctx, ring.Member{Name: "x"}, 99, limiter.Forwarded{Hash: 7, Limit: lim}, limiter.AdminOp{}); err == nil {
		t.Fatal("hops 99 passed")
	}
}

// Bad Peer/Admin requests are InvalidArgument naming the field, and reach
// nothing.
func TestPeerAdminBadRequests(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	rc := rawPeerClient(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok := tokenItem(1, 10, 0)
	for _, tc := range []struct {
		name  string
		req   *sluicev1.PeerAdminRequest
		field string
	}{
		{"no item", &sluicev1.PeerAdminRequest{}, "item"},
		{"hops", &sluicev1.PeerAdminRequest{Hops: 1000, Item: ok}, "hops"},
		{"bad limit", &sluicev1.PeerAdminRequest{Item: &sluicev1.PeerItem{Hash: 1, Limit: &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET}}}, "item.limit.limit"},
		{"bad algorithm", &sluicev1.PeerAdminRequest{Item: &sluicev1.PeerItem{Limit: &sluicev1.PeerLimit{}}}, "item.limit.algorithm"},
		{"remaining", &sluicev1.PeerAdminRequest{Item: ok, ResetState: true, Remaining: -2}, "remaining"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rc.Admin(ctx, tc.req)
			if got := badRequestField(t, err); got != tc.field {
				t.Errorf("field = %q, want %q", got, tc.field)
			}
		})
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.lastFrom != "" {
		t.Errorf("an invalid request reached the service (from %q)", fake.lastFrom)
	}
}

// Peer/CheckAtomic over real gRPC: all or nothing on the owner, and bad
// items refused naming their field.
func TestPeerCheckAtomic(t *testing.T) {
	fake := newFakePeer(t, store.Config{})
	m, _ := startPeerServer(t, "owner", fake)
	c := newTestPeerClient(t, PeerClientConfig{Self: "caller"})
	ctx := context.Background()
	lim := bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 2, Period: time.Hour}
	items := []limiter.Forwarded{{Hash: 1, Limit: lim, Cost: 1}, {Hash: 2, Limit: lim, Cost: 2}}
	out := make([]limiter.Answer, 2)
	if err := c.CheckAtomic(ctx, m, 0, items, out); err != nil || !out[0].Allowed || !out[1].Allowed {
		t.Fatalf("first: %+v %v", out, err)
	}
	if err := c.CheckAtomic(ctx, m, 0, items, out); err != nil || out[0].Allowed || out[1].Allowed {
		t.Fatalf("second: %+v %v, want denied", out, err)
	}
	if res, _ := fake.st.Take(1, lim, now(), 0); res.Remaining != 1 {
		t.Fatalf("key 1 after a denied call: %d left, want 1", res.Remaining)
	}
	rc := rawPeerClient(t, m)
	_, err := rc.CheckAtomic(ctx, &sluicev1.PeerCheckRequest{Items: []*sluicev1.PeerItem{tokenItem(1, 5, 1), {Hash: 2, Limit: &sluicev1.PeerLimit{}}}})
	if got := badRequestField(t, err); got != "items[1].limit.algorithm" {
		t.Errorf("field = %q", got)
	}
	_, err = rc.CheckAtomic(ctx, &sluicev1.PeerCheckRequest{Hops: 1000, Items: []*sluicev1.PeerItem{tokenItem(1, 5, 1)}})
	if got := badRequestField(t, err); got != "hops" {
		t.Errorf("field = %q", got)
	}
}
