package middleware

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/rlheader"
)

// costKey is the context key of a request's costReport.
type costKey struct{}

// costReport is the actual cost a handler reported (ReportCost).
type costReport struct {
	set    atomic.Bool
	actual atomic.Int64
}

// ReportCost reports the actual cost of the request whose context is ctx
// (an LLM response's token count) to the HTTP middleware or the gRPC
// interceptors (the call's context, or its stream's), which settle
// the request's reservations with it when the handler returns: the
// difference from each rule's Estimate is refunded or charged (see
// client.Client.Settle). The last report counts. A request whose handler
// reports nothing is not settled: its reservations settle at their
// estimates when their TTL (the server's default, 1 minute) ends. It
// reports false, doing nothing, when no reserving rule applied to the
// request (or n < 0).
func ReportCost(ctx context.Context, n int64) bool {
	rep, ok := ctx.Value(costKey{}).(*costReport)
	if !ok || n < 0 {
		return false
	}
	rep.actual.Store(n)
	rep.set.Store(true)
	return true
}

// settleTimeout bounds a settle after the handler, whose request context
// may be done by then.
const settleTimeout = 2 * time.Second

// settle settles r with the cost rep holds, if the handler reported one.
func (l *limiter) settle(ctx context.Context, r *client.Reservation, rep *costReport) error {
	if !rep.set.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if _, err := l.client.Settle(ctx, *r, rep.actual.Load()); err != nil {
		return fmt.Errorf("middleware: settling the reported cost: %w", err)
	}
	return nil
}

// reserve reserves the items of the reserving rules (ridx[j] is items[j]'s
// rule), all or nothing: the decision allows the request and holds the
// reservation, or denies it with nothing reserved.
func (l *limiter) reserve(ctx context.Context, items []client.ReserveItem, ridx []int) decision {
	rv, err := l.client.Reserve(ctx, 0, items...)
	if err != nil {
		return l.failed("", err)
	}
	d := decision{allow: true}
	for j := range rv.Items {
		it, rl := &rv.Items[j], &l.rules[ridx[j]]
		if it.Err != nil {
			f := l.failed(rl.name, it.Err)
			return f
		}
		if it.Capacity == 0 && !it.Allowed {
			continue // not tried: an earlier item was denied
		}
		d.add(rl, rlheader.Item{Name: rl.name, Allowed: it.Allowed, Limit: it.Capacity, Remaining: it.Remaining,
			ResetAfter: it.ResetAfter, RetryAfter: it.RetryAfter})
		if !it.Allowed && it.RetryAfter > 0 {
			d.denied = append(d.denied, deniedItem{rule: rl.name, key: items[j].Key})
		}
	}
	if !rv.Allowed {
		d.allow = false
		return d
	}
	d.resv = &rv
	return d
}

// cancel gives back the reservation of a request that does not go on.
func (l *limiter) cancel(ctx context.Context, d *decision) {
	if d.resv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	_, _ = l.client.Settle(ctx, *d.resv, 0) // unsettled, it lapses at its estimate
	d.resv = nil
}
