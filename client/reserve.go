package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// ReserveItem is one estimate to reserve: a key under a policy or an
// inline limit, and the estimated cost (1 to the limit's capacity).
type ReserveItem struct {
	Key      string
	Policy   string
	Limit    Limit
	Estimate int64
}

// Reservation is the answer to Reserve: one Reserved per item, in order.
// Allowed is true when every item was reserved; when one was denied,
// nothing stays reserved (the node cancelled the others).
type Reservation struct {
	Allowed bool
	Items   []Reserved
}

// Reserved is one item's reservation.
type Reserved struct {
	Allowed bool
	// ID names the reservation for Settle; empty unless Allowed.
	ID     string
	Key    string
	Policy string
	Limit  Limit
	// Capacity is the limit's capacity that applied (a token bucket's
	// burst), and Remaining what it has left after the estimate.
	Capacity, Remaining int64
	// ResetAfter is the time until the limit is full again.
	ResetAfter time.Duration
	// RetryAfter is, when denied, the time until the estimate would fit.
	RetryAfter time.Duration
	// ExpiresAfter is the reservation's TTL: unsettled by then, it
	// settles at its estimate.
	ExpiresAfter time.Duration
	Owner        string
	// Err is set when the item could not be evaluated (its owner
	// unreachable, say).
	Err error
}

// Settled is one item's settlement.
type Settled struct {
	// AlreadySettled says an earlier Settle settled it: nothing changed,
	// and the figures are that settle's.
	AlreadySettled bool
	Estimate       int64
	Actual         int64
	// Refunded, Charged and Forgiven split actual-estimate: refunded to
	// the limit, charged to it (possibly into debt), forgiven beyond the
	// debt bound.
	Refunded, Charged, Forgiven int64
	Remaining                   int64
}

// Reserve takes the estimates of items, all or nothing, for ttl (0 means
// the server's default, 1 minute): each allowed item gets a reservation
// that Settle settles with the actual cost.
func (c *Client) Reserve(ctx context.Context, ttl time.Duration, items ...ReserveItem) (Reservation, error) {
	req := &sluicev1.ReserveRequest{Items: make([]*sluicev1.ReserveItem, len(items))}
	for i := range items {
		it := &items[i]
		p := &sluicev1.ReserveItem{Key: it.Key, Estimate: it.Estimate}
		if it.Policy != "" {
			p.Spec = &sluicev1.ReserveItem_Policy{Policy: it.Policy}
		} else {
			p.Spec = &sluicev1.ReserveItem_Limit{Limit: toProtoLimit(&it.Limit)}
		}
		req.Items[i] = p
	}
	if ttl > 0 {
		req.Ttl = durationpb.New(ttl)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.api.Reserve(ctx, req)
	if err != nil {
		return Reservation{}, fmt.Errorf("client: reserve: %w", err)
	}
	out := Reservation{Allowed: resp.GetAllowed(), Items: make([]Reserved, len(items))}
	for i, r := range resp.GetResults() {
		if i >= len(items) {
			break
		}
		o := Reserved{
			Allowed: r.GetAllowed(), ID: r.GetReservationId(), Key: items[i].Key, Policy: items[i].Policy, Limit: items[i].Limit,
			Capacity: r.GetLimit(), Remaining: r.GetRemaining(), ResetAfter: r.GetResetAfter().AsDuration(), RetryAfter: r.GetRetryAfter().AsDuration(), ExpiresAfter: r.GetExpiresAfter().AsDuration(),
			Owner: r.GetOwner(),
		}
		if e := r.GetError(); e != nil {
			o.Err = fmt.Errorf("client: reserve: item %d: %s (code %d)", i, e.GetMessage(), e.GetCode())
		}
		out.Items[i] = o
	}
	return out, nil
}

// Settle settles every reservation of r with the same actual cost (an LLM
// response's token count, charged to each limit), skipping items without
// an ID. Settling twice is safe: the second answers AlreadySettled.
func (c *Client) Settle(ctx context.Context, r Reservation, actual int64) ([]Settled, error) {
	req := &sluicev1.SettleRequest{}
	for i := range r.Items {
		it := &r.Items[i]
		if it.ID == "" {
			continue
		}
		p := &sluicev1.SettleItem{Key: it.Key, ReservationId: it.ID, Actual: actual}
		if it.Policy != "" {
			p.Spec = &sluicev1.SettleItem_Policy{Policy: it.Policy}
		} else {
			p.Spec = &sluicev1.SettleItem_Limit{Limit: toProtoLimit(&it.Limit)}
		}
		req.Items = append(req.Items, p)
	}
	if len(req.Items) == 0 {
		return nil, nil
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.api.Settle(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: settle: %w", err)
	}
	out := make([]Settled, len(resp.GetResults()))
	for i, s := range resp.GetResults() {
		out[i] = Settled{
			AlreadySettled: s.GetAlreadySettled(), Estimate: s.GetEstimate(), Actual: s.GetActual(),
			Refunded: s.GetRefunded(), Charged: s.GetCharged(), Forgiven: s.GetForgiven(), Remaining: s.GetRemaining(),
		}
	}
	return out, nil
}
