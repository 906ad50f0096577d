package grant

import (
	"context"
	"sync"
	"time"
)

// Returning grants. A grant's unspent tokens lapse at its TTL; when the
// grant ends before that (its key moves to another owner, the holder
// leaves, or it stops needing the key), the holder gives them back to the
// issuer, which credits them to the bucket: so a key's count is exact
// across a graceful move. The issuer credits a grant once, at most what it
// recorded, and only before the grant's TTL.

// lot is the unspent part of one grant.
type lot struct {
	n       int64
	expires int64
	issuer  string
	ret     func(ctx context.Context, n int64) error
}

// lapse drops the slot's tokens at their TTL. g.mu is held.
func (g *slot) lapse() {
	g.tokens = 0
	g.lots = g.lots[:0]
}

// add adds a grant's tokens to the slot. g.mu is held.
func (g *slot) add(r *Reply, now int64, ttl time.Duration) {
	if now >= g.expires {
		g.lapse()
	}
	g.tokens += r.Granted
	g.expires = now + int64(ttl)
	if r.Return != nil {
		g.lots = append(g.lots, lot{n: r.Granted, expires: now + int64(ttl), issuer: r.Issuer, ret: r.Return})
	}
}

// spend takes cost tokens, from the oldest lots first. g.mu is held.
func (g *slot) spend(cost int64) {
	g.tokens -= cost
	// Tokens of grants that cannot be returned are spent first: what is
	// left in lots never exceeds g.tokens.
	over := -g.tokens
	for _, l := range g.lots {
		over += l.n
	}
	for over > 0 && len(g.lots) > 0 {
		take := min(over, g.lots[0].n)
		g.lots[0].n -= take
		over -= take
		if g.lots[0].n == 0 {
			g.lots = g.lots[1:]
		}
	}
}

// takeLots removes the slot's unspent tokens and returns the returnable
// ones. g.mu is held.
func (g *slot) takeLots(now int64) []lot {
	var out []lot
	for _, l := range g.lots {
		if l.n > 0 && now < l.expires {
			out = append(out, l)
		}
	}
	g.tokens, g.lots = 0, nil
	return out
}

// Return gives back the unspent tokens of every grant the holder keeps (it
// is leaving), waiting for the returns until ctx ends.
func (h *Holder) Return(ctx context.Context, now int64) {
	h.ReturnIf(ctx, now, func(uint64, string) bool { return true })
}

// ReturnIf gives back the unspent tokens of the grants of the keys for
// which ends(key, issuer) is true (e.g. their owner is not the issuer any
// more), waiting for the returns until ctx ends. A key whose grants it
// returns starts afresh: its next check asks the owner again.
func (h *Holder) ReturnIf(ctx context.Context, now int64, ends func(key uint64, issuer string) bool) {
	h.returnWhere(ctx, now, func(g *slot) bool {
		for _, l := range g.lots {
			if ends(g.key, l.issuer) {
				return true
			}
		}
		return false
	})
}

// ReturnIdle gives back the unspent tokens of keys not used for idle: the
// holder has stopped needing them.
func (h *Holder) ReturnIdle(ctx context.Context, now int64, idle time.Duration) {
	h.returnWhere(ctx, now, func(g *slot) bool { return now-g.lastUse >= int64(idle) })
}

func (h *Holder) returnWhere(ctx context.Context, now int64, ends func(*slot) bool) {
	var lots []lot
	for i := range h.stripes {
		s := &h.stripes[i]
		s.mu.Lock()
		for _, g := range s.m {
			g.mu.Lock()
			if len(g.lots) > 0 && ends(g) {
				lots = append(lots, g.takeLots(now)...)
			}
			g.mu.Unlock()
		}
		s.mu.Unlock()
	}
	// Returns to one issuer share RPCs through the caller's batching: send
	// them at once, a bounded number at a time.
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, l := range lots {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			h.returnFails.Add(1)
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := l.ret(ctx, l.n); err != nil {
				h.returnFails.Add(1)
				return
			}
			h.returned.Add(uint64(l.n))
		}()
	}
	wg.Wait()
}
