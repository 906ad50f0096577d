package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// ErrUnknownReservation is the error of a Settle whose reservation ID
// names no live reservation of the key: never made, made on another key or
// by another holder, or its TTL has ended (it settled at its estimate).
var ErrUnknownReservation = errors.New("limiter: unknown reservation")

// ReserveRequest takes an estimated cost now, to be settled later with
// the actual cost (Settle).
type ReserveRequest struct {
	Request
	// Estimate is the cost taken now: 1 to the limit's capacity.
	// Request.Cost is ignored.
	Estimate int64
	// TTL is how long the reservation waits for its Settle before it
	// settles at its estimate; 0 means DefaultLeaseTTL, and the cap is
	// the lease TTL's (the policy's max_ttl, else the node's MaxLeaseTTL).
	TTL time.Duration
	// Holder is the verified identity of the client, as for AcquireRequest:
	// only a Settle with the same Holder settles the reservation.
	Holder string
}

// Reservation is the answer to a Reserve.
type Reservation struct {
	Result
	// ID names the reservation for Settle; empty when denied.
	ID string
	// ExpiresAfter is the reservation's TTL.
	ExpiresAfter time.Duration
}

// SettleRequest settles a reservation with the actual cost.
type SettleRequest struct {
	Request
	// ID is the reservation's, as Reserve gave it.
	ID string
	// Actual is the actual cost, >= 0 (it may exceed the estimate and the
	// capacity: the excess is charged into debt, up to
	// bucket.TokenDebtBursts or bucket.DebtBursts, and the rest forgiven).
	Actual int64
	// Holder is the verified identity of the client (see ReserveRequest).
	Holder string
}

// Settlement is the answer to a Settle. Its Result is a read of the
// key's state after it.
type Settlement struct {
	Result
	SettleAnswer
}

// SettleAnswer is what the key's owner answers to a settle.
type SettleAnswer struct {
	// Already says the reservation had been settled before: nothing was
	// applied, and the figures are the first settle's.
	Already bool
	// Unknown says the owner holds no such reservation.
	Unknown bool
	// Estimate and Actual are the reservation's; Refunded, Charged and
	// Forgiven as bucket.Settlement.
	Estimate, Actual, Refunded, Charged, Forgiven int64
}

// reservable checks that r's limit can reserve and that n (named field)
// fits it.
func reservable(r *resolved, n int64, field string) error {
	switch r.limit.Algorithm {
	case bucket.Concurrency, bucket.SlidingLog:
		return &FieldError{0, "algorithm", fmt.Sprintf("reservations take token_bucket, fixed_window, sliding_window or fixed_window_hits limits, not %s", r.limit.Algorithm), ErrInvalid}
	}
	if field == "estimate" {
		switch {
		case n <= 0:
			return &FieldError{0, field, "must be > 0", ErrInvalid}
		case n > r.limit.Capacity() && r.limit.Algorithm != bucket.FixedWindowHits:
			return &FieldError{0, field, fmt.Sprintf("%d exceeds the limit's capacity %d", n, r.limit.Capacity()), ErrInvalid}
		}
	} else if n < 0 {
		return &FieldError{0, field, "must be >= 0", ErrInvalid}
	}
	return nil
}

// Reserve takes req.Estimate units of the key on its owner and records a
// reservation of them (see store.Reserve); the answer's ID settles it. A
// denied Reserve takes nothing and has no ID. An owner that cannot be
// reached is an error in the Result (ErrPeerUnavailable): a reservation
// has no fallback, since only the owner could settle it.
func (l *Limiter) Reserve(ctx context.Context, req ReserveRequest) (Reservation, error) {
	req.Cost = 0
	r, err := l.resolve(l.policies.Load(), 0, &req.Request)
	if err != nil {
		return Reservation{}, err
	}
	if err := reservable(&r, req.Estimate, "estimate"); err != nil {
		return Reservation{}, err
	}
	ttl, err := l.leaseTTL(&r, req.TTL)
	if err != nil {
		return Reservation{}, err
	}
	it := Forwarded{Hash: r.hash, Limit: r.limit, Cost: req.Estimate, Holder: HolderTag(req.Holder)}
	a, id, owner := l.reserve(ctx, l.view.Load(), 0, false, it, ttl)
	out := Reservation{Result: Result{Result: a.Result, Err: a.Err, Policy: r.policy, Period: r.limit.Period, Quota: r.limit.Limit, Burst: r.limit.Capacity(), Source: SourceOwner, Owner: owner}}
	if out.Err != nil {
		out.Allowed = false
	}
	if out.Allowed && !id.IsZero() {
		out.ID, out.ExpiresAfter = id.String(), ttl
	}
	req.Cost = req.Estimate
	l.metrics.observe(&req.Request, r.hash, r.limit.Algorithm, &out.Result)
	return out, nil
}

// reserve makes a reservation here or on the owner and names who answered.
func (l *Limiter) reserve(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, ttl time.Duration) (Answer, store.LeaseID, string) {
	forceLocal = forceLocal && !l.leavingForwards(v, hops)
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		var id store.LeaseID
		a, name, nv := l.leaseLocal(ctx, v, mine, it, func(now int64) (bucket.Result, error) {
			var res bucket.Result
			var err error
			id, res, err = l.store.Reserve(it.Hash, it.Limit, now, it.Cost, ttl, it.Holder)
			return res, err
		})
		if nv != nil {
			return l.reserve(ctx, nv, hops, forceLocal, it, ttl)
		}
		return a, id, name
	}
	a, id, err := l.peers.Reserve(ctx, owner, hops, it, ttl)
	if err != nil {
		if nv := l.redirected(ctx, v, hops, err); nv != nil {
			return l.reserve(ctx, nv, hops+1, false, it, ttl) // the epoch's redirect (epochs.go)
		}
		return Answer{Result: bucket.Result{Limit: it.Limit.Capacity()}, Err: err}, store.LeaseID{}, owner.Name
	}
	return a, id, owner.Name
}

// Settle settles a reservation on the key's owner with the actual cost
// (see store.Settle). An ID that names no live reservation of the key is
// ErrUnknownReservation (a *FieldError naming "reservation_id"); one
// settled before answers Already, changing nothing.
func (l *Limiter) Settle(ctx context.Context, req SettleRequest) (Settlement, error) {
	req.Cost = 0
	r, err := l.resolve(l.policies.Load(), 0, &req.Request)
	if err != nil {
		return Settlement{}, err
	}
	if err := reservable(&r, req.Actual, "actual"); err != nil {
		return Settlement{}, err
	}
	id, err := store.ParseLeaseID(req.ID)
	if err != nil {
		return Settlement{}, &FieldError{0, "reservation_id", "malformed reservation id " + policy.Echo(req.ID) + ": want 32 hex digits, as Reserve gave", ErrInvalid}
	}
	id.Holder = HolderTag(req.Holder)
	it := Forwarded{Hash: r.hash, Limit: r.limit, Cost: req.Actual, Holder: id.Holder}
	a, sa, owner := l.settle(ctx, l.view.Load(), 0, false, it, id)
	out := Settlement{Result: Result{Result: a.Result, Err: a.Err, Policy: r.policy, Period: r.limit.Period, Quota: r.limit.Limit, Burst: r.limit.Capacity(), Source: SourceOwner, Owner: owner}, SettleAnswer: sa}
	if sa.Unknown && a.Err == nil {
		return out, &FieldError{0, "reservation_id", "unknown reservation " + policy.Echo(req.ID) + " of this key (never made, another key's or holder's, or its TTL ended and it settled at its estimate)", ErrUnknownReservation}
	}
	return out, nil
}

// settle settles here or on the owner and names who answered.
func (l *Limiter) settle(ctx context.Context, v *view, hops int, forceLocal bool, it Forwarded, id store.LeaseID) (Answer, SettleAnswer, string) {
	forceLocal = forceLocal && !l.leavingForwards(v, hops)
	owner, mine := l.route(v, it.Hash)
	if mine || forceLocal || l.peers == nil {
		var sa SettleAnswer
		a, name, nv := l.leaseLocal(ctx, v, mine, it, func(now int64) (bucket.Result, error) {
			st, err := l.store.Settle(it.Hash, it.Limit, now, id, it.Cost)
			if errors.Is(err, store.ErrUnknownReservation) {
				sa.Unknown = true
				return bucket.Result{Limit: it.Limit.Capacity()}, nil
			}
			sa = SettleAnswer{Already: st.Already, Estimate: st.Estimate, Actual: st.Actual, Refunded: st.Refunded, Charged: st.Charged, Forgiven: st.Forgiven}
			return st.Result, err
		})
		if nv != nil {
			return l.settle(ctx, nv, hops, forceLocal, it, id)
		}
		return a, sa, name
	}
	a, sa, err := l.peers.Settle(ctx, owner, hops, it, id)
	if err != nil {
		if nv := l.redirected(ctx, v, hops, err); nv != nil {
			return l.settle(ctx, nv, hops+1, false, it, id) // the epoch's redirect (epochs.go)
		}
		return Answer{Result: bucket.Result{Limit: it.Limit.Capacity()}, Err: err}, SettleAnswer{}, owner.Name
	}
	return a, sa, owner.Name
}

// ReserveForwarded makes a reservation for another node (ErrNotMember if
// the caller is not one this node knows, as for CheckForwarded).
func (l *Limiter) ReserveForwarded(ctx context.Context, from string, hops int, item Forwarded, ttl time.Duration) (Answer, store.LeaseID, error) {
	if err := l.epochGate(ctx, hops, []Forwarded{item}); err != nil {
		return Answer{}, store.LeaseID{}, err
	}
	if err := l.checkPeer("Reserve", from); err != nil {
		return Answer{}, store.LeaseID{}, err
	}
	a, id, _ := l.reserve(ctx, l.view.Load(), hops+1, hops >= 1, item, ttl)
	return a, id, nil
}

// SettleForwarded settles a reservation for another node (see
// ReserveForwarded).
func (l *Limiter) SettleForwarded(ctx context.Context, from string, hops int, item Forwarded, id store.LeaseID) (Answer, SettleAnswer, error) {
	if err := l.epochGate(ctx, hops, []Forwarded{item}); err != nil {
		return Answer{}, SettleAnswer{}, err
	}
	if err := l.checkPeer("Settle", from); err != nil {
		return Answer{}, SettleAnswer{}, err
	}
	id.Holder = item.Holder
	a, sa, _ := l.settle(ctx, l.view.Load(), hops+1, hops >= 1, item, id)
	return a, sa, nil
}

// Reserve fails at once if node to is suspect.
func (g suspectGate) Reserve(ctx context.Context, to ring.Member, hops int, item Forwarded, ttl time.Duration) (Answer, store.LeaseID, error) {
	if err := g.l.suspected(to.Name); err != nil {
		return Answer{}, store.LeaseID{}, err
	}
	return g.Peers.Reserve(ctx, to, hops, item, ttl)
}

// Settle fails at once if node to is suspect.
func (g suspectGate) Settle(ctx context.Context, to ring.Member, hops int, item Forwarded, id store.LeaseID) (Answer, SettleAnswer, error) {
	if err := g.l.suspected(to.Name); err != nil {
		return Answer{}, SettleAnswer{}, err
	}
	return g.Peers.Settle(ctx, to, hops, item, id)
}
