package limiter

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Owner leases (issue 31; docs/failure.md "Owner leases"). A node decides
// a key as its owner only while it holds its owner lease (Config.OwnerLease,
// renewed through a majority of the group of the ring's epochs), and, for
// a partition the ring moved to it from a member removed as dead, only
// once that member's lease has surely run out (AwaitDead). Otherwise the
// check is answered from its limit's failure mode (fallback), and a check
// another node forwarded here is answered with the error (which wraps
// ErrStateElsewhere: nothing applied), so that its sender falls back. A
// grant, credit or report is answered with the error. The gate is in
// front of every decision as owner: applyLocal (checks, forwarded checks,
// grants, credits, reports), leaseLocal (Acquire, Release) and
// atomicLocal (atomic checks). Checks a node decides as a key's heir on
// its copy (acting.go) are not decisions as owner and are not gated.
//
// Its cost per check decided as owner: one atomic load of the lease's
// last reading, compared with the check's time (read once per check
// already), and a nil test of the view's dead waits (the view the check
// loaded already).

// ErrNoLease answers a check forwarded to a node that holds no owner
// lease (cut off from the majority of the group): it applied nothing.
var ErrNoLease = fmt.Errorf("%w: this node holds no owner lease", ErrStateElsewhere)

// ErrDeadWait answers a check forwarded to the new owner of a key whose
// previous owner was removed as dead less than the dead wait ago: that
// member may still hold its lease. It applied nothing.
var ErrDeadWait = fmt.Errorf("%w: the key's partition moved from a member removed as dead less than the dead wait ago", ErrStateElsewhere)

// MaxLeaseReading is the longest time one reading of Config.OwnerLease is
// trusted for: a lease always held (a group of one) is read again then.
const MaxLeaseReading = time.Minute

// ownerLease is Config.OwnerLease and the lease it last returned.
type ownerLease struct {
	src  func() time.Duration
	last atomic.Pointer[leaseWindow] // nil until first read
}

// leaseWindow is a lease read at from (Unix ns on the limiter's clock),
// held until until. A time before from (the wall clock stepped back) reads
// the lease again.
type leaseWindow struct{ from, until int64 }

// leaseHeld reports whether this node holds its owner lease at now (Unix
// ns on the limiter's clock).
func (l *Limiter) leaseHeld(now int64) bool {
	if l.lease.src == nil {
		return true
	}
	if w := l.lease.last.Load(); w != nil && w.from <= now && now < w.until {
		return true
	}
	// Run out (or never read): read it again, and trust half of what is
	// left, from now (read before the lease: never past the lease's end).
	// Half: the window is on the limiter's clock, a wall clock; one that
	// steps back by s within the window, less than the time elapsed in
	// it (a step further back reads the lease again), holds it s longer,
	// so never past the lease's end either.
	w := &leaseWindow{from: now, until: now}
	if rem := min(l.lease.src(), MaxLeaseReading); rem > 0 {
		w.until = now + int64(rem/2)
	}
	l.lease.last.Store(w)
	return now < w.until
}

// deadWaits holds the dead waits not yet over, by the member removed as
// dead (AwaitDead); active counts them.
type deadWaits struct {
	mu     sync.Mutex
	byName map[string]*deadWait
	active atomic.Int32
}

// deadWait is one member's dead wait; over is set when its caller ends it.
type deadWait struct{ over atomic.Bool }

// AwaitDead tells the limiter that member name was removed as dead: the
// partitions the ring moves from it to this node are decided here as
// their owner only once end is called. The node calls end when
// epoch.Node.DeadWait has passed, on its monotonic clock, since it
// applied the Dead epoch (that member's lease has surely run out then).
// AwaitDead must come before the ring without that member (SetMembers):
// the partitions are those this node gains from it in that ring change,
// and they keep the wait through later changes while this node owns them.
// end may be called more than once, from any goroutine.
func (l *Limiter) AwaitDead(name string) (end func()) {
	w := &deadWait{}
	l.deadWaits.mu.Lock()
	if l.deadWaits.byName == nil {
		l.deadWaits.byName = map[string]*deadWait{}
	}
	if prev := l.deadWaits.byName[name]; prev != nil && !prev.over.Swap(true) {
		l.deadWaits.active.Add(-1) // the new one replaces it
	}
	l.deadWaits.byName[name] = w
	l.deadWaits.active.Add(1)
	l.deadWaits.mu.Unlock()
	return func() {
		// What this node admitted on its copies during the wait (notOwner:
		// actOnCopy) joins the store before it decides the keys there,
		// and again after, for a check that acted while the wait ended.
		l.promoteActed()
		l.deadWaits.mu.Lock()
		if !w.over.Swap(true) {
			l.deadWaits.active.Add(-1)
		}
		if l.deadWaits.byName[name] == w {
			delete(l.deadWaits.byName, name)
		}
		l.deadWaits.mu.Unlock()
		l.promoteActed()
	}
}

// promoteActed merges into the store the acting states (acting.go) of the
// keys this node owns on its ring, as promote does for those of a
// departed owner, and drops them and their reports: decided here as the
// key's heir during a dead wait, they would otherwise be missing from the
// state this node decides on once the wait is over (the keys counted
// afresh).
func (l *Limiter) promoteActed() {
	v := l.view.Load()
	if l.repl.acting == nil || v == nil || v.ring == nil {
		return
	}
	now := l.clock().UnixNano()
	mine := func(k uint64) bool {
		m, ok := v.ring.PartitionOwner(v.ring.Partition(k))
		return ok && m.Name == l.name
	}
	var acted []uint64
	l.repl.acting.Export(now, mine, func(e store.Entry) bool {
		if err := l.store.Import(e, now); err == nil {
			acted = append(acted, e.Key)
		}
		return true
	})
	if len(acted) > 0 {
		l.repl.acting.Delete(acted)
		l.reports.drop(acted)
	}
}

// deadWaitsFor sets nv's dead waits for ring r (replacing old, whose ring
// was oldRing): for the partitions this node owns on r, the wait of the
// member that owned them on oldRing, if it has one not over, else the
// wait old had for them, if not over.
func (l *Limiter) deadWaitsFor(nv, old *view, oldRing, r *ring.Ring) {
	if l.deadWaits.active.Load() == 0 {
		return
	}
	l.deadWaits.mu.Lock()
	defer l.deadWaits.mu.Unlock()
	carried := old != nil && len(old.waits) == r.PartitionCount()
	sameParts := oldRing != nil && oldRing.PartitionCount() == r.PartitionCount()
	for p := 0; p < r.PartitionCount(); p++ {
		if m, ok := r.PartitionOwner(p); !ok || m.Name != l.name {
			continue
		}
		var w *deadWait
		if sameParts {
			if was, ok := oldRing.PartitionOwner(p); ok {
				w = l.deadWaits.byName[was.Name]
			}
		}
		if w == nil && carried {
			w = old.waits[p]
		}
		if w == nil || w.over.Load() {
			continue
		}
		if nv.waits == nil {
			nv.waits = make([]*deadWait, r.PartitionCount())
		}
		nv.waits[p] = w
	}
}

// ownerGate returns the error for which this node may not decide hash as
// its owner on v at now (ErrNoLease, ErrDeadWait), or nil.
func (l *Limiter) ownerGate(v *view, hash uint64, now int64) error {
	if !l.leaseHeld(now) {
		l.metrics.notOwner(reasonNoLease)
		return ErrNoLease
	}
	if v != nil && v.waits != nil && l.deadWaits.active.Load() > 0 {
		if w := v.waits[v.ring.Partition(hash)]; w != nil && !w.over.Load() {
			l.metrics.notOwner(reasonDeadWait)
			return ErrDeadWait
		}
	}
	return nil
}

// notOwner answers j, which this node may not decide as owner (ownerGate's
// err). During a dead wait, a check this node may decide as the key's
// heir (acting.go: a FailLocal limit, replication on) is decided on its
// copy, as the heir does for an unreachable owner: the new owner is the
// dead member's first heir, and its copy carries the key's count.
// Otherwise a forwarded check, a grant, a credit or a report gets err and
// applies nothing, and a check of this node's caller gets the denial of
// the key's state here if it denies (heldDenies), else its failure mode.
func (l *Limiter) notOwner(v *view, j *job, err error, now int64) {
	if err == ErrDeadWait && l.repl.acting != nil && j.mode == policy.FailLocal && !j.upTo && !j.credit && !j.report &&
		j.limit.Algorithm != bucket.Concurrency {
		l.actOnCopy(v, j, now)
		l.metrics.fellBack(j.mode)
		return
	}
	if j.hops > 0 || j.upTo || j.credit || j.report {
		res := j.res
		res.Result = bucket.Result{Limit: j.limit.Capacity()}
		res.Source, res.Owner, res.Err, res.Allowed = SourceFallback, l.name, err, false
		return
	}
	// A key whose state here denies it is not admitted from a local
	// share: this node (the owner cut off, or the new one waiting) knows
	// it spent, and its share would count beside that state.
	if r, ok := l.heldDenies(j, now); ok {
		res := j.res
		res.Result, res.Source, res.Owner, res.Err = r, SourceFallback, l.name, nil
		l.metrics.fellBack(j.mode)
		return
	}
	l.fallback(v, j, ring.Member{Name: l.name}, err, now)
}
