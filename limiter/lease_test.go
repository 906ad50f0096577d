package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
)

// Lease IDs are 128 random bits (32 hex digits), bound to their key: a
// guessed or altered ID, or the right ID with another key, releases
// nothing, and the holder's lease stays held until it is released with
// its own ID. (They used to be a sequence, and Release took any ID.)
func TestLeaseIDsUnguessableAndBound(t *testing.T) {
	l := newLimiter(t, nil)
	ctx := context.Background()
	lim := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 1}
	a, err := l.Acquire(ctx, limiter.AcquireRequest{Request: limiter.Request{Key: "job:a", Limit: lim, Cost: 1}, TTL: time.Hour})
	if err != nil || !a.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	b, err := l.Acquire(ctx, limiter.AcquireRequest{Request: limiter.Request{Key: "job:b", Limit: lim, Cost: 1}, TTL: time.Hour})
	if err != nil || !b.Allowed {
		t.Fatalf("acquire: %+v %v", b, err)
	}
	if len(a.ID) != 32 || a.ID == b.ID {
		t.Fatalf("lease IDs %q and %q: want 32 hex digits, distinct", a.ID, b.ID)
	}
	flip := []byte(a.ID)
	if flip[31] == '0' { // another hex digit in the last place
		flip[31] = '1'
	} else {
		flip[31] = '0'
	}
	release := func(key, id string) bool {
		t.Helper()
		ok, _, err := l.Release(ctx, limiter.ReleaseRequest{Request: limiter.Request{Key: key, Limit: lim}, LeaseID: id})
		if err != nil {
			t.Fatalf("release %s %q: %v", key, id, err)
		}
		return ok
	}
	if release("job:b", a.ID) || release("job:a", string(flip)) || release("job:a", b.ID) {
		t.Fatal("a lease was released with another key's ID or an altered one")
	}
	if r, _ := l.Acquire(ctx, limiter.AcquireRequest{Request: limiter.Request{Key: "job:a", Limit: lim, Cost: 1}, TTL: time.Hour}); r.Allowed {
		t.Fatal("job:a's lease was freed by the failed releases")
	}
	if !release("job:a", a.ID) || !release("job:b", b.ID) {
		t.Fatal("the holders could not release their own leases")
	}
	// An ID in the old sequential form is malformed.
	if _, _, err := l.Release(ctx, limiter.ReleaseRequest{Request: limiter.Request{Key: "job:a", Limit: lim}, LeaseID: "1f"}); err == nil {
		t.Fatal("a short lease id was accepted")
	}
}
