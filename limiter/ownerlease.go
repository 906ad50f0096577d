package limiter

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/ring"
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
// expiry, compared with the check's time (read once per check already);
// the view's dead-wait horizon is a field of the view the check loaded.

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
	// Run out (or never read): read it again, and place what is left on
	// now's scale (read before the lease: never past the lease's end).
	w := &leaseWindow{from: now, until: now}
	if rem := min(l.lease.src(), MaxLeaseReading); rem > 0 {
		w.until = now + int64(rem)
	}
	l.lease.last.Store(w)
	return now < w.until
}

// deadWaits holds, per member removed as dead (AwaitDead), the time (Unix
// ns on the limiter's clock) before which this node decides none of the
// partitions the ring moves from it.
type deadWaits struct {
	mu     sync.Mutex
	byName map[string]int64
}

// AwaitDead tells the limiter that member name was removed as dead and
// that the partitions the ring moves from it to this node may be decided
// here as their owner only once wait has passed (on Clock): the node
// applied the Dead epoch, and wait is epoch.Node.DeadWait. It must come
// before the ring without that member (SetMembers): the partitions are
// those this node gains from it in that ring change, and they keep the
// wait through later changes while this node owns them.
func (l *Limiter) AwaitDead(name string, wait time.Duration) {
	nb := l.clock().UnixNano() + int64(wait)
	l.deadWaits.mu.Lock()
	defer l.deadWaits.mu.Unlock()
	if l.deadWaits.byName == nil {
		l.deadWaits.byName = map[string]int64{}
	}
	if nb > l.deadWaits.byName[name] {
		l.deadWaits.byName[name] = nb
	}
}

// deadWaitsFor sets nv's dead waits for ring r (replacing old, whose ring
// was oldRing) at now: the partitions this node owns on r that oldRing gave
// to a member with a dead wait not yet over, and those old still waited
// for that this node still owns.
func (l *Limiter) deadWaitsFor(nv, old *view, oldRing, r *ring.Ring, now int64) {
	var waits map[string]int64
	l.deadWaits.mu.Lock()
	for name, nb := range l.deadWaits.byName {
		if nb <= now {
			delete(l.deadWaits.byName, name)
			continue
		}
		if waits == nil {
			waits = map[string]int64{}
		}
		waits[name] = nb
	}
	l.deadWaits.mu.Unlock()
	carried := old != nil && old.waitUntil > now && len(old.notBefore) == r.PartitionCount()
	if waits == nil && !carried {
		return
	}
	sameParts := oldRing != nil && oldRing.PartitionCount() == r.PartitionCount()
	for p := 0; p < r.PartitionCount(); p++ {
		if m, ok := r.PartitionOwner(p); !ok || m.Name != l.name {
			continue
		}
		var nb int64
		if carried {
			nb = old.notBefore[p]
		}
		if sameParts {
			if was, ok := oldRing.PartitionOwner(p); ok && waits[was.Name] > nb {
				nb = waits[was.Name]
			}
		}
		if nb <= now {
			continue
		}
		if nv.notBefore == nil {
			nv.notBefore = make([]int64, r.PartitionCount())
		}
		nv.notBefore[p] = nb
		nv.waitUntil = max(nv.waitUntil, nb)
	}
}

// ownerGate returns the error for which this node may not decide hash as
// its owner on v at now (ErrNoLease, ErrDeadWait), or nil.
func (l *Limiter) ownerGate(v *view, hash uint64, now int64) error {
	if !l.leaseHeld(now) {
		l.metrics.notOwner(reasonNoLease)
		return ErrNoLease
	}
	if v != nil && now < v.waitUntil && v.ring != nil && now < v.notBefore[v.ring.Partition(hash)] {
		l.metrics.notOwner(reasonDeadWait)
		return ErrDeadWait
	}
	return nil
}

// notOwner answers j, which this node may not decide as owner (ownerGate's
// err): a forwarded check, a grant, a credit or a report gets err and
// applies nothing; a check of this node's caller gets its failure mode.
func (l *Limiter) notOwner(v *view, j *job, err error, now int64) {
	if j.hops > 0 || j.upTo || j.credit || j.report {
		res := j.res
		res.Result = bucket.Result{Limit: j.limit.Capacity()}
		res.Source, res.Owner, res.Err, res.Allowed = SourceFallback, l.name, err, false
		return
	}
	l.fallback(v, j, ring.Member{Name: l.name}, err, now)
}
