package limiter

import (
	"context"
	"errors"
)

// ReserveAll reserves every item of reqs, in order, all or nothing: when
// an item is denied (or fails), the reservations already made are
// cancelled (settled at 0, a full refund) and the later items are not
// tried (the results end at the denied item). It reports whether every item was
// reserved. Invalid input fails the call before anything is taken, with a
// *FieldError whose Index is the item's.
func (l *Limiter) ReserveAll(ctx context.Context, reqs []ReserveRequest) ([]Reservation, bool, error) {
	if len(reqs) == 0 || len(reqs) > MaxItems {
		return nil, false, tooManyItems(len(reqs))
	}
	set := l.policies.Load()
	for i := range reqs {
		rq := reqs[i].Request
		rq.Cost = 0
		r, err := l.resolve(set, i, &rq)
		if err == nil {
			err = reservable(&r, reqs[i].Estimate, "estimate")
		}
		if err == nil {
			_, err = l.leaseTTL(&r, reqs[i].TTL)
		}
		if err != nil {
			return nil, false, withIndex(err, i)
		}
	}
	out := make([]Reservation, len(reqs))
	for i := range reqs {
		res, err := l.Reserve(ctx, reqs[i])
		if err != nil {
			l.cancel(ctx, reqs[:i], out[:i])
			return nil, false, withIndex(err, i)
		}
		out[i] = res
		if !res.Allowed {
			l.cancel(ctx, reqs[:i], out[:i])
			return out[:i+1], false, nil
		}
	}
	return out, true, nil
}

// cancel settles the reservations made at 0, clears their IDs and
// reports the state after it.
func (l *Limiter) cancel(ctx context.Context, reqs []ReserveRequest, made []Reservation) {
	for i := range made {
		if made[i].ID == "" {
			continue
		}
		st, err := l.Settle(ctx, SettleRequest{Request: reqs[i].Request, ID: made[i].ID, Holder: reqs[i].Holder})
		made[i].ID, made[i].Allowed, made[i].ExpiresAfter = "", false, 0
		if err == nil && st.Err == nil {
			made[i].Remaining, made[i].ResetAfter = st.Remaining, st.ResetAfter
		}
	}
}

// SettleAll settles every item of reqs, in order. The first item that
// fails stops it: its error (a *FieldError with the item's Index;
// ErrUnknownReservation for an unknown ID) is returned, and the items
// before it stay settled (settling is idempotent, so a retry of the whole
// call is safe).
func (l *Limiter) SettleAll(ctx context.Context, reqs []SettleRequest) ([]Settlement, error) {
	if len(reqs) == 0 || len(reqs) > MaxItems {
		return nil, tooManyItems(len(reqs))
	}
	out := make([]Settlement, len(reqs))
	for i := range reqs {
		st, err := l.Settle(ctx, reqs[i])
		if err != nil {
			return out[:i], withIndex(err, i)
		}
		out[i] = st
	}
	return out, nil
}

// withIndex sets the item index of a *FieldError.
func withIndex(err error, i int) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		c := *fe
		c.Index = i
		return &c
	}
	return err
}
