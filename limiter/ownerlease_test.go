package limiter_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// leases gives each node of a limitertest cluster an owner lease the test
// sets (Config.OwnerLease) and a metrics registry; nodes are named in the
// order limitertest builds them (NewCluster's names, in order).
type leases struct {
	names []string
	mu    sync.Mutex
	until map[string]time.Time
	regs  map[string]*prometheus.Registry
	built int
	clock func() time.Time // the cluster's
}

func newLeases(names ...string) *leases {
	return &leases{names: names, until: map[string]time.Time{}, regs: map[string]*prometheus.Registry{}}
}

// configure is the cluster's configure: node i gets names[i]'s lease (held
// from the fake clock's start for an hour until set).
func (ls *leases) configure(cfg *limiter.Config) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	name := ls.names[ls.built]
	ls.built++
	ls.until[name] = limitertest.Epoch.Add(time.Hour)
	ls.regs[name] = prometheus.NewRegistry()
	cfg.Registerer = ls.regs[name]
	cfg.OwnerLease = func() time.Duration {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return ls.until[name].Sub(ls.clock())
	}
}

func (ls *leases) set(name string, until time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.until[name] = until
}

// refused reads node name's sluice_owner_refused_total{reason}.
func (ls *leases) refused(t *testing.T, name, reason string) float64 {
	t.Helper()
	mfs, err := ls.regs[name].Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_owner_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" && lp.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A node decides its keys as owner only while its lease is held: once it
// has run out, its own checks get the failure mode and checks forwarded
// to it are answered so that their sender falls back (nothing counted on
// the owner); a renewed lease resumes decisions on the owner's count.
func TestOwnerLeaseDecidesOnlyWhileHeld(t *testing.T) {
	ls := newLeases("a", "b")
	c := limitertest.NewCluster(t, ls.configure, "a", "b")
	ls.clock = c.Clock.Now
	key := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 1)[0]
	check := func(on string) limiter.Result {
		return c.Check(on, limiter.Request{Key: key, Limit: hourly, Cost: 1})[0]
	}
	ls.set("a", limitertest.Epoch.Add(time.Second))
	for _, on := range []string{"a", "b"} {
		if r := check(on); r.Err != nil || r.Source != limiter.SourceOwner || !r.Allowed {
			t.Fatalf("lease held, check on %s: %+v, want decided by the owner", on, r)
		}
	}
	c.Clock.Advance(2 * time.Second) // a's lease ran out
	for _, on := range []string{"a", "b", "a"} {
		if r := check(on); r.Err != nil || r.Source != limiter.SourceFallback || !r.Allowed {
			t.Fatalf("lease run out, check on %s: %+v, want the failure mode's answer", on, r)
		}
	}
	if got := ls.refused(t, "a", "no_lease"); got != 3 {
		t.Errorf("a's owner_refused_total{no_lease} = %v, want 3", got)
	}
	ls.set("a", c.Clock.Now().Add(time.Second)) // renewed
	r := check("a")
	if r.Err != nil || r.Source != limiter.SourceOwner || r.Remaining != 97 {
		t.Fatalf("lease renewed, check on a: %+v, want decided by the owner with 97 left (the fallback answers counted nothing there)", r)
	}
	// A lease that runs out without a renewal in between: the last
	// reading is not kept past its expiry.
	c.Clock.Advance(1500 * time.Millisecond)
	if r := check("a"); r.Source != limiter.SourceFallback {
		t.Fatalf("renewed lease run out, check on a: %+v, want the failure mode's answer", r)
	}
}

// An owner whose lease ran out does not admit from its local share a key
// its own state shows spent (the cut-off owner of a split would count
// its share beside the state it holds); a key with room gets the share.
func TestOwnerLeaseLostDeniesSpentKey(t *testing.T) {
	ls := newLeases("a", "b")
	c := limitertest.NewCluster(t, ls.configure, "a", "b")
	ls.clock = c.Clock.Now
	keys := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 2)
	ls.set("a", limitertest.Epoch.Add(time.Second))
	spend(t, c, "a", keys[:1], hourly, 100)
	c.Clock.Advance(2 * time.Second) // a's lease ran out
	if r := c.Check("a", limiter.Request{Key: keys[0], Limit: hourly, Cost: 1})[0]; r.Allowed || r.Source != limiter.SourceFallback {
		t.Errorf("spent key on its owner without the lease: %+v, want denied (its state here is spent)", r)
	}
	if r := c.Check("a", limiter.Request{Key: keys[1], Limit: hourly, Cost: 1})[0]; !r.Allowed || r.Source != limiter.SourceFallback {
		t.Errorf("fresh key on its owner without the lease: %+v, want the failure mode's admission", r)
	}
}

// An Acquire (concurrency lease) and an atomic check are decisions as
// owner too.
func TestOwnerLeaseGatesAcquireAndAtomic(t *testing.T) {
	ls := newLeases("a")
	c := limitertest.NewCluster(t, ls.configure, "a")
	ls.clock = c.Clock.Now
	ls.set("a", limitertest.Epoch.Add(-time.Second))
	r, err := c.Node("a").CheckAtomic(t.Context(), []limiter.Request{{Key: "x", Limit: hourly, Cost: 1}}, nil)
	if !errors.Is(err, limiter.ErrNoLease) {
		t.Errorf("atomic check without the lease: %+v, %v; want ErrNoLease", r, err)
	}
	lr, err := c.Node("a").Acquire(t.Context(), limiter.AcquireRequest{Request: limiter.Request{Key: "y", Limit: bucket.Limit{Algorithm: bucket.Concurrency, Limit: 2}, Cost: 1}})
	if err != nil || lr.Source != limiter.SourceFallback {
		t.Errorf("Acquire without the lease: %+v, %v; want the failure mode's answer", lr, err)
	}
}

// The new owner of a partition the ring moved from a member removed as
// dead decides none of its keys before the dead wait is over (the member
// may still hold its lease, cut off), though it decides its other keys;
// a ring change meanwhile keeps the wait. (The node ends the wait when
// epoch.Node.DeadWait has passed on its monotonic clock: node/epochs.go.)
func TestDeadWaitDelaysTheDeadMembersPartitions(t *testing.T) {
	c := limitertest.NewCluster(t, noReplicas, "a", "b", "c")
	req := limiter.Request{Limit: hourly}
	moved := c.KeysOwnedBy("a", "c", "m", req, 8)
	own := c.KeysOwnedBy("a", "a", "o", req, 1)[0]
	var ends []func()
	for _, n := range []string{"a", "b"} {
		ends = append(ends, c.Node(n).AwaitDead("c"))
	}
	c.Remove("c")
	c.SetMembers("a", "b")
	decidedBy := func(on, key string) limiter.Source {
		r := c.Check(on, limiter.Request{Key: key, Limit: hourly, Cost: 1})[0]
		if r.Err != nil {
			t.Fatalf("check %s on %s: %v", key, on, r.Err)
		}
		return r.Source
	}
	if got := decidedBy("a", own); got != limiter.SourceOwner {
		t.Fatalf("a's own key during the dead wait: %v, want decided by a", got)
	}
	var toA []string
	for _, k := range moved {
		if c.Owner("a", limiter.Request{Key: k, Limit: hourly}) == "a" {
			toA = append(toA, k)
		}
		for _, on := range []string{"a", "b"} {
			if got := decidedBy(on, k); got != limiter.SourceFallback {
				t.Fatalf("key %s moved from the dead c, checked on %s during the dead wait: %v, want the failure mode", k, on, got)
			}
		}
	}
	if len(toA) == 0 {
		t.Fatal("no key of c moved to a")
	}
	c.Clock.Advance(time.Hour) // the wait is not on the limiter's clock
	c.SetMembers("a", "b")     // a later ring change keeps the wait
	if got := decidedBy("a", toA[0]); got != limiter.SourceFallback {
		t.Fatalf("after a ring change, within the dead wait: %v, want the failure mode", got)
	}
	for _, end := range ends {
		end()
		end() // again: no effect
	}
	for _, k := range moved {
		for _, on := range []string{"a", "b"} {
			if got := decidedBy(on, k); got != limiter.SourceOwner {
				t.Fatalf("key %s on %s after the dead wait: %v, want decided by its new owner", k, on, got)
			}
		}
	}
}

// With replication, the new owner during the dead wait is the dead
// member's first heir and decides the key's checks on its copy, as it
// does while acting for an unreachable owner: through every node, a key
// spent to 60 of 100 admits 40 more in all, not a share per node.
func TestDeadWaitHeirDecidesOnItsCopy(t *testing.T) {
	c, key, heir, other := spentOnA(t, nil)
	var ends []func()
	for _, n := range []string{"b", "c"} {
		ends = append(ends, c.Node(n).AwaitDead("a"))
	}
	c.Remove("a")
	c.SetMembers("b", "c")
	if got := c.Owner(other, limiter.Request{Key: key, Limit: hourly}); got != heir {
		t.Fatalf("the key's new owner is %s, want its first heir %s", got, heir)
	}
	for i, on := range []string{heir, other, heir} {
		r := c.Check(on, limiter.Request{Key: key, Limit: hourly, Cost: 1})[0]
		// (A forwarded answer carries no source: the sender names the
		// node that decided it.)
		if r.Err != nil || on == heir && r.Source != limiter.SourceFallback || !r.Allowed || r.Remaining != int64(39-i) {
			t.Fatalf("check %d on %s during the dead wait: %+v, want decided on the heir's copy, %d left", i, on, r, 39-i)
		}
	}
	if got := admitted(c, other, key, 50) + admitted(c, heir, key, 50); got != 37 {
		t.Errorf("admitted %d more during the dead wait, want the 37 left of the copy", got)
	}
	for _, end := range ends {
		end()
	}
	// What the heir admitted on its copy during the wait is in the
	// state it decides on as owner after it: the key stays spent.
	if r := c.Check(heir, limiter.Request{Key: key, Limit: hourly, Cost: 1})[0]; r.Source != limiter.SourceOwner || r.Allowed {
		t.Fatalf("after the dead wait: %+v, want denied by the owner (the copy's 40 were spent during the wait)", r)
	}
	if got := admitted(c, other, key, 50); got != 0 {
		t.Errorf("admitted %d more after the dead wait, want 0", got)
	}
}

// BenchmarkCheckOwnerLease is a one-item local Check with no lease source
// and with a held lease: what the gate costs per check decided as owner
// (compare allocs/op; time is noise on a shared machine).
func BenchmarkCheckOwnerLease(b *testing.B) {
	for _, name := range []string{"none", "held"} {
		b.Run(name, func(b *testing.B) {
			cfg := limiter.Config{NodeName: "n1", Clock: func() time.Time { return limitertest.Epoch }}
			reads := 0
			if name == "held" {
				cfg.OwnerLease = func() time.Duration { reads++; return time.Hour }
			}
			l, err := limiter.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			reqs := []limiter.Request{{Key: "user:1", Limit: tb(1_000_000_000, time.Second), Cost: 1}}
			out := make([]limiter.Result, 0, 1)
			b.ReportAllocs()
			for b.Loop() {
				if out, err = l.Check(context.Background(), reqs, out); err != nil || out[0].Source != limiter.SourceOwner {
					b.Fatal(out, err)
				}
			}
			b.ReportMetric(float64(reads), "lease-reads")
		})
	}
}
