package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/store"
)

// Inspect and Reset: an operator's look at one key, and its reset, on the
// key's owner. They are routed like a check (forwarded to the owner over
// Peers.Admin, decided there once the key's state is there), but never
// fall back: an unreachable owner is an error wrapping ErrPeerUnavailable.
// Who may call them is the API's business (api's admin identity).

// ResetFull is the remaining of a Reset to full.
const ResetFull = -1

// MaxInspectLeases is the most leases a KeyInfo lists (LeaseCount counts
// them all).
const MaxInspectLeases = 100

// AdminOp is what Peers.Admin asks of a key's owner: an inspection, or a
// reset to Remaining units (ResetFull for full) followed by one.
type AdminOp struct {
	Reset     bool
	Remaining int64
}

// KeyInfo is one key's state on its owner.
type KeyInfo struct {
	// Owner is the node that answered: the key's owner.
	Owner string
	// Policy is the policy's name ("" for an inline limit) and Algorithm
	// the limit's, as asked (a calendar token bucket, a quota, is
	// TokenBucket). Both are filled by the node the caller asked.
	Policy    string
	Algorithm bucket.Algorithm
	// Result is a read of the key (a take of 0): its Limit (capacity),
	// Remaining and ResetAfter.
	bucket.Result
	// Now is the owner's clock when it read the key (unix ns).
	Now int64
	// Exists says whether the owner holds a live state of the key.
	Exists bool
	// WindowStart is the start of the current window of a window
	// algorithm's state (unix ns), 0 otherwise.
	WindowStart int64
	// Grants and GrantedTokens are a token bucket's grants the owner gave
	// out of the key and has not seen returned or expired.
	Grants        int
	GrantedTokens int64
	// Leases are a concurrency limit's live leases (at most
	// MaxInspectLeases), LeaseCount how many it holds.
	Leases     []LeaseInfo
	LeaseCount int
	// Reservations counts the key's live unsettled reservations (reserve
	// and settle), ReservedUnits the sum of their estimates.
	Reservations  int
	ReservedUnits int64
	// DebtUnits is a token bucket's debt below empty under this limit
	// (bucket.TokenDebt.Units: the units refill pays before the bucket is
	// back at empty), 0 for none or another limit's.
	DebtUnits int64
}

// LeaseInfo is one live lease of a concurrency limit.
type LeaseInfo struct {
	Cost int64
	// ExpiresAfter is the time from KeyInfo.Now until the lease lapses.
	ExpiresAfter time.Duration
	// Bound says whether the lease is bound to a client's identity.
	Bound bool
}

// Inspect reads a key's state on its owner, changing nothing. req names
// the key and the limit (policy or inline) as a check would; its Cost and
// UpTo are ignored. Validation errors are *FieldError naming the field.
func (l *Limiter) Inspect(ctx context.Context, req Request) (KeyInfo, error) {
	return l.admin(ctx, req, AdminOp{})
}

// Reset sets a key to remaining units left (0 to the limit's capacity),
// or to full with ResetFull, on its owner, and returns its state after. A
// concurrency limit resets only to full, dropping its leases. A remaining
// out of range is a *FieldError naming "remaining".
func (l *Limiter) Reset(ctx context.Context, req Request, remaining int64) (KeyInfo, error) {
	return l.admin(ctx, req, AdminOp{Reset: true, Remaining: remaining})
}

// admin validates req and op and runs op on the key's owner.
func (l *Limiter) admin(ctx context.Context, req Request, op AdminOp) (KeyInfo, error) {
	req.Cost, req.UpTo, req.Client = 0, false, ""
	// An operator may look at any key, also one an RLS rule made under a
	// policy file that refuses callers' inline limits.
	req.Trusted = true
	set := l.policies.Load()
	r, err := l.resolve(set, 0, &req)
	if err != nil {
		return KeyInfo{}, err
	}
	asked := req.Limit.Algorithm
	if p, ok := set.Lookup(req.Policy); ok && req.Policy != "" {
		asked = p.Limit.Algorithm
	}
	if op.Reset {
		capacity := r.limit.Capacity()
		switch {
		case op.Remaining < ResetFull:
			return KeyInfo{}, &FieldError{0, "remaining", "must be >= 0", ErrInvalid}
		case op.Remaining > capacity:
			return KeyInfo{}, &FieldError{0, "remaining", fmt.Sprintf("%d exceeds the limit's capacity %d", op.Remaining, capacity), ErrInvalid}
		case op.Remaining >= 0 && r.limit.Algorithm == bucket.Concurrency:
			return KeyInfo{}, &FieldError{0, "remaining", "a concurrency limit resets only to full (its leases dropped); omit remaining", ErrInvalid}
		}
	}
	it := Forwarded{Hash: r.hash, Limit: r.limit, Inline: r.inline()}
	info, err := l.adminAt(ctx, l.view.Load(), 0, false, it, op)
	info.Policy, info.Algorithm = r.policy, asked
	return info, err
}

// AdminForwarded runs op for another node on a key this node owns, or
// forwards it once more (ErrNotMember if the caller is not one this node
// knows, as for CheckForwarded).
func (l *Limiter) AdminForwarded(ctx context.Context, from string, hops int, item Forwarded, op AdminOp) (KeyInfo, error) {
	if err := l.epochGate(ctx, hops, []Forwarded{item}); err != nil {
		return KeyInfo{}, err
	}
	if err := l.checkPeer("Admin", from); err != nil {
		return KeyInfo{}, err
	}
	return l.adminAt(ctx, l.view.Load(), hops+1, hops >= 1, item, op)
}

// adminAt runs op here, once the key's state is here (as a lease is taken:
// leaseLocal), or on the key's owner.
func (l *Limiter) adminAt(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, op AdminOp) (KeyInfo, error) {
	forceLocal = forceLocal && !l.leavingForwards(v, hops)
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		var info KeyInfo
		a, name, nv := l.leaseLocal(ctx, v, mine, it, func(now int64) (bucket.Result, error) {
			var err error
			info, err = l.adminLocal(it, op, now)
			return info.Result, err
		})
		if nv != nil {
			return l.adminAt(ctx, nv, hops, forceLocal, it, op)
		}
		info.Owner = name
		return info, a.Err
	}
	info, err := l.peers.Admin(ctx, owner, hops, it, op)
	if err != nil {
		if nv := l.redirected(ctx, v, hops, err); nv != nil {
			return l.adminAt(ctx, nv, hops+1, false, it, op) // the epoch's redirect (epochs.go)
		}
		return KeyInfo{Owner: owner.Name}, err
	}
	return info, nil
}

// adminLocal runs op on this node's store.
func (l *Limiter) adminLocal(it Forwarded, op AdminOp, now int64) (KeyInfo, error) {
	if op.Reset {
		remaining := op.Remaining
		if remaining == ResetFull {
			remaining = it.Limit.Capacity()
		}
		if err := l.store.Reset(it.Hash, it.Limit, now, remaining); err != nil {
			if errors.Is(err, store.ErrInvalidEntry) {
				return KeyInfo{}, &FieldError{0, "remaining", err.Error(), ErrInvalid}
			}
			return KeyInfo{}, err
		}
	}
	info := KeyInfo{Now: now}
	var err error
	if it.Limit.Algorithm == bucket.Concurrency {
		_, info.Result, err = l.store.Acquire(it.Hash, it.Limit, now, 0, 0)
	} else {
		info.Result, err = l.store.Take(it.Hash, it.Limit, now, 0)
	}
	if err != nil {
		return KeyInfo{}, err
	}
	info.Allowed, info.RetryAfter = false, 0 // a read: neither means anything
	stored := it.Limit.Algorithm
	if it.Limit.IsQuota() {
		stored = bucket.FixedWindow
	}
	for _, e := range l.store.Copy(now, []uint64{it.Hash}) {
		if e.Algorithm != stored {
			continue
		}
		for _, r := range e.Reservations {
			if d := r.Debt(); d.Owns(it.Limit, now) {
				info.DebtUnits = d.Units(now)
			}
			if !r.Settled && r.Expires > now {
				info.Reservations++
				info.ReservedUnits += r.Estimate
			}
		}
		if len(e.Reservations) > 0 && e.ExpiresAt() == 0 {
			continue // the key's reservations alone, no state
		}
		info.Exists = true
		switch stored {
		case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
			info.WindowStart = e.Window.Start
		case bucket.Concurrency:
			for _, le := range e.Leases.Leases {
				if le.Expires <= now {
					continue
				}
				info.LeaseCount++
				if len(info.Leases) < MaxInspectLeases {
					info.Leases = append(info.Leases, LeaseInfo{Cost: le.Cost, ExpiresAfter: time.Duration(le.Expires - now), Bound: le.Holder != 0})
				}
			}
		}
	}
	if stored == bucket.TokenBucket {
		info.Grants, info.GrantedTokens = l.ledger.outstanding(it.Hash, now)
	}
	return info, nil
}

// outstanding returns the number of unexpired grants of hash in the
// ledger and their tokens.
func (g *grantLedger) outstanding(hash uint64, now int64) (n int, tokens int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.m {
		if r.hash == hash && now < r.expires {
			n, tokens = n+1, tokens+r.tokens
		}
	}
	return n, tokens
}
