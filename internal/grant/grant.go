// Package grant owns the bookkeeping of local token grants: a holder (a
// node that does not own a key, or a client) keeps tokens granted by the
// key's owner and spends them without a network hop, refills them ahead of
// need, and caches the owner's denials. The owner side is a take of "up to
// N" tokens (store.TakeUpTo); this package is the holder side, shared by
// package limiter and the Go client. It does no I/O itself: the caller
// passes an Ask function that reaches the owner.
package grant

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures grants on one holder.
type Config struct {
	// Threshold is the rate of one key's checks at this holder (units per
	// second) above which keys in auto mode use grants. 0 means 50;
	// negative turns auto grants off.
	Threshold float64
	// TTL is how long a grant's tokens may be spent; unspent ones lapse.
	// 0 means 1s.
	TTL time.Duration
	// Refill sizes a grant: what this holder spends in Refill at its
	// observed rate. 0 means 100ms.
	Refill time.Duration
	// DenyHold is the shortest time an empty or short grant is cached as a
	// denial. 0 means 10ms.
	DenyHold time.Duration
	// MaxKeys bounds the keys tracked. 0 means 65,536.
	MaxKeys int
}

// WithDefaults fills zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.Threshold == 0 {
		c.Threshold = 50
	}
	if c.TTL <= 0 {
		c.TTL = time.Second
	}
	if c.Refill <= 0 {
		c.Refill = 100 * time.Millisecond
	}
	if c.DenyHold <= 0 {
		c.DenyHold = 10 * time.Millisecond
	}
	if c.MaxKeys <= 0 {
		c.MaxKeys = 1 << 16
	}
	return c
}

// Reply is the owner's answer to a grant request.
type Reply struct {
	// Granted is the number of tokens the owner spent for this holder.
	Granted int64
	// Remaining, ResetAfter and RetryAfter describe the owner's bucket
	// after the grant (RetryAfter: for one token, when none was granted).
	Remaining  int64
	ResetAfter time.Duration
	RetryAfter time.Duration
	// Return, when set, gives n unspent tokens of this grant back to its
	// issuer (at most Granted, once). The holder calls it when the grant
	// ends early: see Holder.Return.
	Return func(ctx context.Context, n int64) error
	// Issuer names the node that issued the grant (for ReturnIf).
	Issuer string
}

// Ask requests up to want tokens from the key's owner. An error means the
// owner was not reached: the check must then go the usual way.
type Ask func(ctx context.Context, want int64) (Reply, error)

// Outcome is a check answered from a grant.
type Outcome struct {
	Allowed    bool
	Remaining  int64
	ResetAfter time.Duration
	RetryAfter time.Duration
}

// Stats counts grant activity on a holder.
type Stats struct {
	// Local counts checks answered from a grant or a cached denial.
	Local uint64
	// Requests counts grant requests sent to owners.
	Requests uint64
	// Misses counts checks of a granted key that found no token and had to
	// wait for a grant.
	Misses uint64
	// Granted counts the tokens owners granted.
	Granted uint64
	// Expired counts granted tokens that lapsed unspent (TTL), including
	// those of keys dropped by Sweep.
	Expired uint64
	// Returned counts unspent tokens given back to their issuers (sent:
	// the issuer may credit fewer), ReturnFailures the returns that failed.
	Returned, ReturnFailures uint64
}

const stripes = 64

// Holder keeps the grants of one node or client. It is safe for concurrent
// use; background refills are its goroutines, stopped by Close.
type Holder struct {
	cfg     Config
	stripes [stripes]struct {
		mu sync.Mutex
		m  map[uint64]*slot
	}
	local, requests, misses atomic.Uint64
	granted, expired        atomic.Uint64
	returned, returnFails   atomic.Uint64
	bg                      sync.WaitGroup
	ctx                     context.Context
	cancel                  context.CancelFunc
}

// NewHolder builds a holder.
func NewHolder(cfg Config) *Holder {
	h := &Holder{cfg: cfg.WithDefaults()}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Config returns the holder's configuration, with defaults.
func (h *Holder) Config() Config { return h.cfg }

// Close stops background refills and waits for them.
func (h *Holder) Close() {
	h.cancel()
	h.bg.Wait()
}

// Stats returns the holder's counters.
func (h *Holder) Stats() Stats {
	return Stats{Local: h.local.Load(), Requests: h.requests.Load(), Misses: h.misses.Load(),
		Granted: h.granted.Load(), Expired: h.expired.Load(),
		Returned: h.returned.Load(), ReturnFailures: h.returnFails.Load()}
}

// slot is one key's grant state. Guarded by mu.
type slot struct {
	mu       sync.Mutex
	winStart int64 // rate window
	winUnits int64
	lastRate float64
	lastUse  int64

	key         uint64
	tokens      int64
	expires     int64
	lots        []lot // the returnable part of tokens, oldest first
	remaining   int64 // the owner's remaining after the last grant
	resetAfter  time.Duration
	deniedUntil int64
	deniedCost  int64
	shortAt     int64         // when the owner last granted less than asked; 0 since a full grant
	inflight    chan struct{} // closed when the request in flight ends; nil if none
}

// get returns the slot of key, creating it unless the holder is full.
func (h *Holder) get(key uint64) *slot {
	s := &h.stripes[key%stripes]
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.m[key]
	if g == nil {
		if len(s.m) >= h.cfg.MaxKeys/stripes {
			return nil
		}
		if s.m == nil {
			s.m = map[uint64]*slot{}
		}
		g = &slot{key: key}
		s.m[key] = g
	}
	return g
}

// Sweep drops the state of keys unused for a minute.
func (h *Holder) Sweep(now int64) {
	for i := range h.stripes {
		s := &h.stripes[i]
		s.mu.Lock()
		for k, g := range s.m {
			g.mu.Lock()
			idle := now-g.lastUse > int64(time.Minute) && g.inflight == nil
			if idle {
				h.lapse(g)
			}
			g.mu.Unlock()
			if idle {
				delete(s.m, k)
			}
		}
		s.mu.Unlock()
	}
}

// lapse drops g's unspent tokens, whose grant expired, counting them.
// g.mu is held.
func (h *Holder) lapse(g *slot) {
	if g.tokens > 0 {
		h.expired.Add(uint64(g.tokens))
	}
	g.lapse()
}

// observe adds units to the key's rate estimate and returns the rate.
func (g *slot) observe(now, units int64) float64 {
	const window = int64(time.Second)
	if el := now - g.winStart; el >= window || el < 0 {
		if el > 0 && el < 2*window {
			g.lastRate = float64(g.winUnits) / (float64(el) / float64(time.Second))
		} else {
			g.lastRate = 0
		}
		g.winStart, g.winUnits = now, 0
	}
	g.winUnits += units
	g.lastUse = now
	return max(g.lastRate, float64(g.winUnits))
}

// Use tries to answer a check of cost units (cost > 0) on key from a grant.
// most caps a grant (e.g. capacity/(2 × nodes)); capacity bounds the
// remaining reported. With always false (auto mode), keys below the
// threshold rate are not granted. clock gives the time for background
// refills. It reports false when the check must go to the owner the usual
// way (not hot enough, the holder is full, or the owner was not reached).
func (h *Holder) Use(ctx context.Context, key uint64, now, cost, capacity, most int64, always bool, ask Ask, clock func() int64) (Outcome, bool) {
	if !always && h.cfg.Threshold < 0 {
		return Outcome{}, false
	}
	g := h.get(key)
	if g == nil {
		return Outcome{}, false
	}
	for attempt := 0; ; attempt++ {
		g.mu.Lock()
		rate := g.observe(now, cost)
		if attempt == 0 && !always && rate < h.cfg.Threshold && g.tokens == 0 {
			g.mu.Unlock()
			return Outcome{}, false
		}
		if now >= g.expires {
			h.lapse(g)
		}
		target := min(most, max(cost, int64(rate*h.cfg.Refill.Seconds())))
		if g.tokens >= cost {
			g.spend(cost)
			out := h.answer(g, capacity, true, 0)
			if g.tokens < target/2 && g.inflight == nil && cost <= target && g.deniedUntil <= now {
				h.refill(g, target, ask, clock)
			}
			g.mu.Unlock()
			return out, true
		}
		if g.deniedUntil > now && cost >= g.deniedCost {
			out := h.answer(g, capacity, false, time.Duration(g.deniedUntil-now))
			g.mu.Unlock()
			return out, true
		}
		if g.shortAt != 0 && now-g.shortAt < int64(h.cfg.Refill) && cost <= target {
			// The owner ran short moments ago: the key is at its limit,
			// and its tokens come as the owner accrues them. Rather than
			// have this check wait a round trip for one, deny it here and
			// ask in the background: the tokens that come admit the next
			// checks, so the key admits as much, without the waits.
			if g.inflight == nil {
				h.refill(g, target, ask, clock)
			}
			out := h.answer(g, capacity, false, h.cfg.DenyHold)
			g.mu.Unlock()
			return out, true
		}
		if wait := g.inflight; wait != nil && attempt == 0 {
			// A request is on its way: wait for it rather than asking too.
			g.mu.Unlock()
			h.misses.Add(1)
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return Outcome{}, false
			}
		}
		if g.inflight != nil {
			g.mu.Unlock()
			return Outcome{}, false
		}
		// No tokens: ask the owner now, for this check and the next ones.
		done := make(chan struct{})
		g.inflight = done
		g.mu.Unlock()
		h.misses.Add(1)
		ok := h.request(ctx, g, max(target, cost), now, ask)
		g.mu.Lock()
		g.inflight = nil
		close(done)
		if !ok {
			g.mu.Unlock()
			return Outcome{}, false
		}
		var out Outcome
		if g.tokens >= cost {
			g.spend(cost)
			out = h.answer(g, capacity, true, 0)
		} else {
			retry := time.Duration(g.deniedUntil - now)
			if retry <= 0 {
				retry = h.cfg.DenyHold
			}
			out = h.answer(g, capacity, false, retry)
		}
		g.mu.Unlock()
		return out, true
	}
}

// answer builds an outcome from the slot. g.mu is held.
func (h *Holder) answer(g *slot, capacity int64, allowed bool, retry time.Duration) Outcome {
	h.local.Add(1)
	out := Outcome{Allowed: allowed, Remaining: min(capacity, g.tokens+g.remaining), ResetAfter: g.resetAfter}
	if !allowed {
		out.RetryAfter = max(retry, time.Nanosecond)
	}
	return out
}

// request asks the owner for up to want tokens and adds them to g. It
// reports false when the owner was not reached. g.mu is not held.
func (h *Holder) request(ctx context.Context, g *slot, want, now int64, ask Ask) bool {
	h.requests.Add(1)
	r, err := ask(ctx, want)
	if err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case r.Granted >= want:
		if now >= g.expires {
			h.lapse(g)
		}
		h.granted.Add(uint64(r.Granted))
		g.add(&r, now, h.cfg.TTL)
		g.deniedUntil, g.deniedCost, g.shortAt = 0, 0, 0
	case r.Granted > 0:
		// The owner is running short: spend what it gave, then hold off
		// (deny locally) for DenyHold rather than ask for crumbs.
		if now >= g.expires {
			h.lapse(g)
		}
		h.granted.Add(uint64(r.Granted))
		g.add(&r, now, h.cfg.TTL)
		g.deniedUntil, g.deniedCost, g.shortAt = now+int64(h.cfg.DenyHold), 1, now
	default:
		g.deniedUntil = now + int64(max(r.RetryAfter, h.cfg.DenyHold))
		g.deniedCost, g.shortAt = 1, now
	}
	g.remaining, g.resetAfter = r.Remaining, r.ResetAfter
	return true
}

// refill requests more tokens for g in the background. g.mu is held.
func (h *Holder) refill(g *slot, want int64, ask Ask, clock func() int64) {
	done := make(chan struct{})
	g.inflight = done
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		h.request(h.ctx, g, want, clock(), ask)
		g.mu.Lock()
		g.inflight = nil
		close(done)
		g.mu.Unlock()
	}()
}
