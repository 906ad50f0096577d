package limiter

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
)

// Local token grants. A node that does not own a key, and sees many checks
// of it, asks the owner for a batch of tokens (a grant) and answers checks
// from it without a network hop:
//
//   - The owner spends the granted tokens from the bucket at once, so the
//     cluster never admits more than the bucket allows: admitted <= the
//     bucket's bound. A grant's unspent tokens lapse after GrantConfig.TTL,
//     so under-admission is at most the tokens held in unexpired grants,
//     and a grant is spent within TTL of being taken.
//   - A grant holds what this node spends in GrantConfig.Refill at its
//     observed rate, at most capacity/(2 × nodes), so one node cannot
//     starve the others. When it falls below half, one refill is requested
//     in the background, ahead of need; refills of many keys to one owner
//     share RPCs through the peer client's batching.
//   - When the owner has no tokens, the node caches the denial until the
//     owner's retry-after (at least GrantConfig.DenyHold) and denies locally
//     meanwhile; when it has fewer than asked for, the node spends them and
//     then denies locally for DenyHold before asking again, so a saturated
//     key costs each node at most one request per DenyHold.
//   - Grants apply to token buckets only; windows, logs and concurrency
//     limits always go to the owner. Reads (cost 0) also go to the owner.
//   - Per policy, grants are used for keys above GrantConfig.Threshold
//     checks/s at this node (auto, the default), always, or never.

// GrantConfig configures local token grants.
type GrantConfig struct {
	// Threshold is the rate of one key's checks at this node (units per
	// second) above which limits in GrantAuto mode use grants. 0 means 50;
	// negative turns auto grants off.
	Threshold float64
	// TTL is how long a grant's tokens may be spent; unspent ones lapse.
	// 0 means 1s.
	TTL time.Duration
	// Refill sizes a grant: what this node spends in Refill at its observed
	// rate. 0 means 100ms.
	Refill time.Duration
	// DenyHold is the shortest time an empty grant is cached as a denial.
	// 0 means 10ms.
	DenyHold time.Duration
	// MaxKeys bounds the keys this node tracks for grants. 0 means 65,536.
	MaxKeys int
}

func (c GrantConfig) withDefaults() GrantConfig {
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

// GrantStats counts grant activity on this node.
type GrantStats struct {
	// Local counts checks answered from a grant or a cached denial.
	Local uint64
	// Requests counts grant requests sent to owners.
	Requests uint64
	// Misses counts checks of a granted key that found no token and had
	// to wait for a grant.
	Misses uint64
}

const grantStripes = 64

// grantTable holds grant state by key hash, lock-striped.
type grantTable struct {
	cfg     GrantConfig
	stripes [grantStripes]struct {
		mu sync.Mutex
		m  map[uint64]*grant
	}
	local, requests, misses atomic.Uint64
}

// grant is one key's grant state on this node. Guarded by mu.
type grant struct {
	mu       sync.Mutex
	winStart int64 // rate window
	winUnits int64
	lastRate float64
	lastUse  int64

	tokens      int64
	expires     int64
	remaining   int64 // the owner's remaining after the last grant
	resetAfter  time.Duration
	deniedUntil int64
	deniedCost  int64
	inflight    chan struct{} // closed when the request in flight ends; nil if none
}

// get returns the grant state of hash, creating it unless the table is full.
func (t *grantTable) get(hash uint64) *grant {
	s := &t.stripes[hash%grantStripes]
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.m[hash]
	if g == nil {
		if len(s.m) >= t.cfg.MaxKeys/grantStripes {
			return nil
		}
		if s.m == nil {
			s.m = map[uint64]*grant{}
		}
		g = &grant{}
		s.m[hash] = g
	}
	return g
}

// sweep drops grant states unused for a minute.
func (t *grantTable) sweep(now int64) {
	for i := range t.stripes {
		s := &t.stripes[i]
		s.mu.Lock()
		for h, g := range s.m {
			g.mu.Lock()
			idle := now-g.lastUse > int64(time.Minute) && g.inflight == nil
			g.mu.Unlock()
			if idle {
				delete(s.m, h)
			}
		}
		s.mu.Unlock()
	}
}

// observe adds units to the key's rate estimate and returns the rate.
func (g *grant) observe(now, units int64) float64 {
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

// GrantStats returns this node's grant counters.
func (l *Limiter) GrantStats() GrantStats {
	return GrantStats{Local: l.grants.local.Load(), Requests: l.grants.requests.Load(), Misses: l.grants.misses.Load()}
}

// useGrant tries to answer j, whose owner is another node, from a grant.
// It reports false when j must go to the owner the usual way.
func (l *Limiter) useGrant(ctx context.Context, v *view, j *job, owner ring.Member, now int64) bool {
	if j.limit.Algorithm != bucket.TokenBucket || j.cost == 0 || j.grants == policy.GrantNever || l.peers == nil {
		return false
	}
	if j.grants == policy.GrantAuto && l.grants.cfg.Threshold < 0 {
		return false
	}
	g := l.grants.get(j.hash)
	if g == nil {
		return false
	}
	capacity := j.limit.Capacity()
	most := max(1, capacity/int64(2*ringSize(v)))
	for attempt := 0; ; attempt++ {
		g.mu.Lock()
		rate := g.observe(now, j.cost)
		if attempt == 0 && j.grants == policy.GrantAuto && rate < l.grants.cfg.Threshold && g.tokens == 0 {
			g.mu.Unlock()
			return false
		}
		if now >= g.expires {
			g.tokens = 0
		}
		target := min(most, max(j.cost, int64(rate*l.grants.cfg.Refill.Seconds())))
		if g.tokens >= j.cost {
			g.tokens -= j.cost
			l.answerGrant(j, owner, g, true, 0)
			if g.tokens < target/2 && g.inflight == nil && j.cost <= target && g.deniedUntil <= now {
				l.refill(g, j, owner, target)
			}
			g.mu.Unlock()
			return true
		}
		if g.deniedUntil > now && j.cost >= g.deniedCost {
			l.answerGrant(j, owner, g, false, time.Duration(g.deniedUntil-now))
			g.mu.Unlock()
			return true
		}
		if wait := g.inflight; wait != nil && attempt == 0 {
			// A request is on its way: wait for it rather than asking too.
			g.mu.Unlock()
			l.grants.misses.Add(1)
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return false
			}
		}
		if g.inflight != nil {
			g.mu.Unlock()
			return false
		}
		// No tokens: ask the owner now, for this check and the next ones.
		done := make(chan struct{})
		g.inflight = done
		g.mu.Unlock()
		l.grants.misses.Add(1)
		ok := l.requestGrant(ctx, g, j.hash, j.limit, max(target, j.cost), now)
		g.mu.Lock()
		g.inflight = nil
		close(done)
		if !ok {
			g.mu.Unlock()
			return false
		}
		if g.tokens >= j.cost {
			g.tokens -= j.cost
			l.answerGrant(j, owner, g, true, 0)
		} else {
			retry := time.Duration(g.deniedUntil - now)
			if retry <= 0 {
				retry = l.grants.cfg.DenyHold
			}
			l.answerGrant(j, owner, g, false, retry)
		}
		g.mu.Unlock()
		return true
	}
}

// answerGrant fills j's result from the grant state. g.mu is held.
func (l *Limiter) answerGrant(j *job, owner ring.Member, g *grant, allowed bool, retry time.Duration) {
	res := j.res
	capacity := j.limit.Capacity()
	res.Result = bucket.Result{Allowed: allowed, Limit: capacity,
		Remaining: min(capacity, g.tokens+g.remaining), ResetAfter: g.resetAfter}
	if !allowed {
		res.RetryAfter = max(retry, time.Nanosecond)
	}
	res.Source, res.Owner, res.Err = SourceGrant, owner.Name, nil
	l.grants.local.Add(1)
	l.metrics.observe(j.limit.Algorithm, res)
}

// requestGrant asks hash's owner for up to want tokens and adds them to g.
// It reports false when the owner could not be reached. g.mu is not held.
func (l *Limiter) requestGrant(ctx context.Context, g *grant, hash uint64, lim bucket.Limit, want, now int64) bool {
	v := l.view.Load()
	owner, mine := l.route(v, hash)
	if mine {
		return false // the key came here meanwhile: decide it locally
	}
	l.grants.requests.Add(1)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.fetchTimeout)
	defer cancel()
	var ans [1]Answer
	err := l.peers.Check(rctx, owner, 0, []Forwarded{{Hash: hash, Limit: lim, Cost: want, UpTo: true}}, ans[:])
	if err != nil || ans[0].Err != nil {
		return false
	}
	a := ans[0]
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case a.Granted >= want:
		if now >= g.expires {
			g.tokens = 0
		}
		g.tokens += a.Granted
		g.expires = now + int64(l.grants.cfg.TTL)
		g.deniedUntil, g.deniedCost = 0, 0
	case a.Granted > 0:
		// The owner is running short: spend what it gave, then hold off
		// (deny locally) for DenyHold rather than ask for crumbs.
		if now >= g.expires {
			g.tokens = 0
		}
		g.tokens += a.Granted
		g.expires = now + int64(l.grants.cfg.TTL)
		g.deniedUntil, g.deniedCost = now+int64(l.grants.cfg.DenyHold), 1
	default:
		g.deniedUntil = now + int64(max(a.RetryAfter, l.grants.cfg.DenyHold))
		g.deniedCost = 1
	}
	g.remaining, g.resetAfter = a.Remaining, a.ResetAfter
	return true
}

// refill requests more tokens for g in the background. g.mu is held.
func (l *Limiter) refill(g *grant, j *job, owner ring.Member, want int64) {
	done := make(chan struct{})
	g.inflight = done
	hash, lim := j.hash, j.limit
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		l.requestGrant(l.bgCtx, g, hash, lim, want, l.clock().UnixNano())
		g.mu.Lock()
		g.inflight = nil
		close(done)
		g.mu.Unlock()
	}()
}
