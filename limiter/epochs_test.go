package limiter_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/ring"
)

// epochSource is a node's applied epoch for a test (node's ringEpoch
// stands in production): Epoch and WaitEpoch of limiter.Config. onWait,
// if set, runs in its own goroutine at each wait for an epoch above the
// current one: the test applies it there (the ring, then the epoch), as
// the node's ringLoop does, or does nothing (a node that does not catch
// up).
type epochSource struct {
	mu      sync.Mutex
	e       uint64
	changed chan struct{}
	waited  []uint64
	onWait  func(e uint64)
}

func newEpochSource(e uint64) *epochSource {
	return &epochSource{e: e, changed: make(chan struct{})}
}

func (s *epochSource) load() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e
}

func (s *epochSource) set(e uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e = e
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *epochSource) wait(ctx context.Context, e uint64) error {
	s.mu.Lock()
	s.waited = append(s.waited, e)
	if s.onWait != nil && e > s.e {
		go s.onWait(e)
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		cur, ch := s.e, s.changed
		s.mu.Unlock()
		if cur >= e {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

func (s *epochSource) waits() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waited)
}

// epochCluster builds nodes ns on limitertest's network, each with its
// source of srcs (none: epochs not used, as a node of peer protocol 1),
// and gives every node the ring of all of ns but those of without.
func epochCluster(t *testing.T, wait time.Duration, srcs map[string]*epochSource, ns []string, without ...string) *limitertest.Cluster {
	t.Helper()
	i := 0
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) {
		cfg.Replicas = -1
		cfg.CatchUpWait = wait
		if s := srcs[ns[i]]; s != nil {
			cfg.Epoch, cfg.WaitEpoch = s.load, s.wait
		}
		i++
	})
	for _, n := range ns {
		c.Add(n)
	}
	var ring []string
	for _, n := range ns {
		if !slices.Contains(without, n) {
			ring = append(ring, n)
		}
	}
	c.SetMembers(ring...)
	return c
}

// setRing gives node l the ring of names (from any goroutine).
func setRing(t *testing.T, l *limiter.Limiter, names ...string) {
	ms := make([]ring.Member, len(names))
	for i, n := range names {
		ms[i] = ring.Member{Name: n, GRPCAddr: "mem:" + n}
	}
	if err := l.SetMembers(ms); err != nil {
		t.Errorf("SetMembers(%v): %v", names, err)
	}
}

// keyMoving is a key owned by from on node a's ring and by to on node
// b's, under lim.
func keyMoving(t *testing.T, c *limitertest.Cluster, a, from, b, to string, lim bucket.Limit) string {
	t.Helper()
	for _, k := range c.KeysOwnedBy(a, from, "moving", limiter.Request{Limit: lim}, 200) {
		if c.Owner(b, limiter.Request{Key: k, Limit: lim}) == to {
			return k
		}
	}
	t.Fatalf("no key owned by %s on %s's ring and by %s on %s's", from, a, to, b)
	return ""
}

var epochLimit = bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 10, Period: time.Hour}

// A receiver behind the sender's epoch catches up first, then serves the
// call on the sender's ring: n1 (epoch 2: n3 left) sends n2 a key that
// epoch 2 gives n2 and epoch 1 gave n3; n2 applies epoch 2 while the call
// waits and decides the key itself, rather than forward it to n3 by its
// stale ring.
func TestEpochReceiverBehindCatchesUpThenServes(t *testing.T) {
	srcs := map[string]*epochSource{"n1": newEpochSource(1), "n2": newEpochSource(1), "n3": newEpochSource(1)}
	c := epochCluster(t, 5*time.Second, srcs, []string{"n1", "n2", "n3"})
	setRing(t, c.Node("n1"), "n1", "n2")
	srcs["n1"].set(2)
	k := keyMoving(t, c, "n2", "n3", "n1", "n2", epochLimit)
	srcs["n2"].onWait = func(e uint64) {
		setRing(t, c.Node("n2"), "n1", "n2")
		srcs["n2"].set(e)
	}
	res := c.Check("n1", limiter.Request{Key: k, Limit: epochLimit, Cost: 1})[0]
	if res.Err != nil || res.Source != limiter.SourceOwner || res.Owner != "n2" || !res.Allowed {
		t.Fatalf("check: %+v, want allowed by its owner n2", res)
	}
	if got := srcs["n2"].waits(); !slices.Equal(got, []uint64{2}) {
		t.Errorf("n2 waited for epochs %v, want [2]", got)
	}
	if got := c.Net.Calls("n2", "n3").Check; got != 0 {
		t.Errorf("n2 forwarded %d checks to n3 by its stale ring, want 0", got)
	}
}

// A receiver that does not apply the sender's epoch within CatchUpWait
// refuses the call, applying nothing (no forward by its stale ring
// either); the sender answers it as for an unreachable owner.
func TestEpochReceiverBehindRefusesAfterTheWait(t *testing.T) {
	const wait = 50 * time.Millisecond
	srcs := map[string]*epochSource{"n1": newEpochSource(1), "n2": newEpochSource(1), "n3": newEpochSource(1)}
	c := epochCluster(t, wait, srcs, []string{"n1", "n2", "n3"})
	setRing(t, c.Node("n1"), "n1", "n2")
	srcs["n1"].set(2)
	k := keyMoving(t, c, "n2", "n3", "n1", "n2", epochLimit)
	start := time.Now()
	res := c.Check("n1", limiter.Request{Key: k, Limit: epochLimit, Cost: 1})[0]
	if took := time.Since(start); took < wait {
		t.Errorf("answered after %v, before the catch-up wait %v", took, wait)
	}
	if res.Source == limiter.SourceOwner && res.Owner == "n2" {
		t.Errorf("check: %+v, want not decided by n2, which did not catch up", res)
	}
	if !errors.Is(res.Err, limiter.ErrEpochBehind) && res.Source != limiter.SourceFallback {
		t.Errorf("check: %+v, want the failure mode's answer (or ErrEpochBehind)", res)
	}
	if got := srcs["n2"].waits(); !slices.Equal(got, []uint64{2}) {
		t.Errorf("n2 waited for epochs %v, want [2]", got)
	}
	if got := c.Net.Calls("n2", "n3").Check; got != 0 {
		t.Errorf("n2 forwarded %d checks to n3 by its stale ring, want 0", got)
	}
	if n := c.Node("n2").Store().Stats().Keys; n != 0 {
		t.Errorf("n2 holds %d states, want none (nothing applied)", n)
	}
}

// A receiver ahead of the sender that does not own the key on its ring
// redirects: the sender applies the receiver's epoch (waiting for it) and
// routes the key again, to its owner on the new ring, which decides it.
// n1 is at epoch 1 ({n1,n2,n3}); n3 and n4 at epoch 2 (n4 joined), which
// moves the key from n3 to n4.
func TestEpochReceiverAheadRedirectsAndTheSenderReroutes(t *testing.T) {
	srcs := map[string]*epochSource{"n1": newEpochSource(1), "n2": newEpochSource(1), "n3": newEpochSource(2), "n4": newEpochSource(2)}
	c := epochCluster(t, 5*time.Second, srcs, []string{"n1", "n2", "n3", "n4"}, "n4")
	all := []string{"n1", "n2", "n3", "n4"}
	setRing(t, c.Node("n3"), all...)
	setRing(t, c.Node("n4"), all...)
	k := keyMoving(t, c, "n1", "n3", "n3", "n4", epochLimit)
	srcs["n1"].onWait = func(e uint64) {
		setRing(t, c.Node("n1"), all...)
		srcs["n1"].set(e)
	}
	res := c.Check("n1", limiter.Request{Key: k, Limit: epochLimit, Cost: 1})[0]
	if res.Err != nil || res.Source != limiter.SourceOwner || res.Owner != "n4" || !res.Allowed {
		t.Fatalf("check: %+v, want allowed by its owner n4 on epoch 2", res)
	}
	if got := srcs["n1"].waits(); !slices.Equal(got, []uint64{2}) {
		t.Errorf("n1 waited for epochs %v, want [2] (the redirect's)", got)
	}
	if got := c.Net.Calls("n3", "n4").Check; got != 0 {
		t.Errorf("n3 forwarded %d checks to n4 itself, want 0 (a redirect)", got)
	}
	if got := c.Net.Calls("n1", "n4").Check; got != 1 {
		t.Errorf("n1 sent %d checks to n4, want 1 (the re-route)", got)
	}
	// A sender that does not catch up answers the redirected check as for
	// an unreachable owner: bounded, nothing decided on n3.
	c2 := epochCluster(t, 50*time.Millisecond, map[string]*epochSource{"n1": newEpochSource(1), "n3": newEpochSource(2), "n4": newEpochSource(2)}, all, "n4")
	setRing(t, c2.Node("n3"), all...)
	setRing(t, c2.Node("n4"), all...)
	res = c2.Check("n1", limiter.Request{Key: k, Limit: epochLimit, Cost: 1})[0]
	if res.Source == limiter.SourceOwner {
		t.Errorf("check with a sender that does not catch up: %+v, want the failure mode's answer", res)
	}
	if got := c2.Net.Calls(limitertest.Any, "n4").Check; got != 0 {
		t.Errorf("%d checks reached n4, want 0", got)
	}
}

// A call from a node without epochs (peer protocol 1: epoch 0, unknown)
// is served as before: a receiver ahead that does not own the key
// forwards it once more to its owner, and nothing waits.
func TestEpochZeroIsServedAsBefore(t *testing.T) {
	srcs := map[string]*epochSource{"n3": newEpochSource(2), "n4": newEpochSource(2)}
	all := []string{"n1", "n2", "n3", "n4"}
	c := epochCluster(t, 5*time.Second, srcs, all, "n4")
	setRing(t, c.Node("n3"), all...)
	setRing(t, c.Node("n4"), all...)
	k := keyMoving(t, c, "n1", "n3", "n3", "n4", epochLimit)
	res := c.Check("n1", limiter.Request{Key: k, Limit: epochLimit, Cost: 1})[0]
	if res.Err != nil || res.Source != limiter.SourceOwner || !res.Allowed {
		t.Fatalf("check: %+v, want allowed by an owner", res)
	}
	if got := c.Net.Calls("n3", "n4").Check; got != 1 {
		t.Errorf("n3 forwarded %d checks to n4, want 1 (as before epochs)", got)
	}
	if got := srcs["n3"].waits(); len(got) != 0 {
		t.Errorf("n3 waited for epochs %v, want none", got)
	}
}

// Config: WaitEpoch is required with Epoch, CatchUpWait not negative.
func TestEpochConfig(t *testing.T) {
	for name, cfg := range map[string]limiter.Config{
		"WaitEpoch":   {NodeName: "n1", Epoch: func() uint64 { return 0 }},
		"CatchUpWait": {NodeName: "n1", CatchUpWait: -time.Millisecond},
	} {
		if _, err := limiter.New(cfg); !errors.Is(err, limiter.ErrInvalidConfig) || !strings.Contains(err.Error(), name+":") {
			t.Errorf("%s: New: %v, want ErrInvalidConfig naming it", name, err)
		}
	}
}

// Leases follow the same rule: an Acquire sent by its epoch 1 ring to n3,
// at epoch 2 and no longer the key's owner, is redirected, and the lease
// is taken on n4, the key's owner at epoch 2.
func TestEpochAcquireRedirected(t *testing.T) {
	srcs := map[string]*epochSource{"n1": newEpochSource(1), "n2": newEpochSource(1), "n3": newEpochSource(2), "n4": newEpochSource(2)}
	all := []string{"n1", "n2", "n3", "n4"}
	c := epochCluster(t, 5*time.Second, srcs, all, "n4")
	setRing(t, c.Node("n3"), all...)
	setRing(t, c.Node("n4"), all...)
	conc := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}
	k := keyMoving(t, c, "n1", "n3", "n3", "n4", conc)
	srcs["n1"].onWait = func(e uint64) {
		setRing(t, c.Node("n1"), all...)
		srcs["n1"].set(e)
	}
	lease, err := c.Node("n1").Acquire(context.Background(), limiter.AcquireRequest{Request: limiter.Request{Key: k, Limit: conc, Cost: 1}, TTL: time.Minute})
	if err != nil || lease.Err != nil || !lease.Allowed || lease.Owner != "n4" || lease.Source != limiter.SourceOwner {
		t.Fatalf("Acquire: %+v, %v; want a lease taken on n4", lease, err)
	}
	if got := c.Net.Calls("n1", "n4").Acquire; got != 1 {
		t.Errorf("n1 sent %d acquires to n4, want 1 (the re-route)", got)
	}
	if got := c.Net.Calls("n3", "n4").Acquire; got != 0 {
		t.Errorf("n3 forwarded %d acquires to n4 itself, want 0 (a redirect)", got)
	}
}

// A leaving node sends epoch 0 (its ring is its own, no epoch's, and it
// may never apply the epoch that removes it) and serves calls as before,
// without waiting for an epoch.
func TestEpochLeavingNodeIsUnknown(t *testing.T) {
	srcs := map[string]*epochSource{"n1": newEpochSource(3), "n2": newEpochSource(3)}
	c := epochCluster(t, 5*time.Second, srcs, []string{"n1", "n2"})
	if e := c.Node("n1").Epoch(); e != 3 {
		t.Fatalf("Epoch() = %d, want 3", e)
	}
	if err := c.Leave("n1", "n2"); err != nil {
		t.Fatal(err)
	}
	if e := c.Node("n1").Epoch(); e != 0 {
		t.Errorf("a leaving node's Epoch() = %d, want 0", e)
	}
	// n2, at epoch 4 but still on the ring with n1, sends n1 a key of
	// n1's: n1 passes it on without waiting for epoch 4.
	srcs["n2"].set(4)
	k := c.KeysOwnedBy("n2", "n1", "leaving", limiter.Request{Limit: epochLimit}, 1)[0]
	res := c.Check("n2", limiter.Request{Key: k, Limit: epochLimit, Cost: 1})[0]
	if res.Err != nil || !res.Allowed {
		t.Fatalf("check on n2: %+v", res)
	}
	if got := c.Net.Calls("n2", "n1").Check; got != 1 {
		t.Errorf("n2 sent %d checks to n1, want 1", got)
	}
	if got := srcs["n1"].waits(); len(got) != 0 {
		t.Errorf("the leaving node waited for epochs %v, want none", got)
	}
}

// A receiver whose ring lacks the caller catches up to the caller's epoch
// before refusing it as a non-member: n4 joined in epoch 2, which n2 has
// not applied yet; n4's check of a key n2 owns on both rings is decided by
// n2 once it applied epoch 2, not refused and answered by n4's failure
// mode.
func TestEpochJoinerIsTakenOnceTheReceiverCatchesUp(t *testing.T) {
	srcs := map[string]*epochSource{"n1": newEpochSource(1), "n2": newEpochSource(1), "n3": newEpochSource(1), "n4": newEpochSource(2)}
	c := epochCluster(t, 5*time.Second, srcs, []string{"n1", "n2", "n3", "n4"}, "n4")
	setRing(t, c.Node("n4"), "n1", "n2", "n3", "n4")
	k := keyMoving(t, c, "n2", "n2", "n4", "n2", epochLimit)
	srcs["n2"].onWait = func(e uint64) {
		setRing(t, c.Node("n2"), "n1", "n2", "n3", "n4")
		srcs["n2"].set(e)
	}
	res := c.Check("n4", limiter.Request{Key: k, Limit: epochLimit, Cost: 1})[0]
	if res.Err != nil || res.Source != limiter.SourceOwner || res.Owner != "n2" || !res.Allowed {
		t.Fatalf("check: %+v, want allowed by its owner n2", res)
	}
	if got := srcs["n2"].waits(); !slices.Equal(got, []uint64{2}) {
		t.Errorf("n2 waited for epochs %v, want [2]", got)
	}
}
