package limiter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/ring"
)

// Returning grants. A grant's unspent tokens would lapse at its TTL; when
// the grant ends early (its key moves, the holder leaves or stops needing
// it) the holder returns them to the grant's issuer, the node that spent
// them from the bucket, under the grant's id:
//
//   - The issuer records each grant it gives (grantLedger: id, key, tokens,
//     expiry) and credits a return only of a grant it recorded, for that
//     key, before its TTL ends, at most the tokens it granted, and once:
//     a double or forged return credits nothing. The ledger is bounded; a
//     grant given while it is full is not recorded and cannot be returned.
//   - The credit goes to the key's owner on the issuer's ring: the issuer
//     itself, or the node the key moved to (a credit item, sent like a
//     check, so it waits for the key's state there as a check would).
//   - The bucket takes the tokens back never above capacity
//     (bucket.GiveToken). Returns are best effort: one that fails leaves
//     the tokens to lapse, as before.
//
// Holders return grants whose issuer is not the key's owner any more at
// each HandOff, all of them when leaving (ReturnGrants), and those of
// keys idle for a while at each Sweep.

// errCreditElsewhere answers a credit that reached a node which neither
// owns the key by its ring nor holds its state: nothing was applied.
var errCreditElsewhere = errors.New("limiter: credit for a key whose state is elsewhere")

// grantLedger records the grants this node issued. Safe for concurrent use.
type grantLedger struct {
	mu  sync.Mutex
	m   map[uint64]grantRecord
	max int
}

type grantRecord struct {
	hash    uint64
	tokens  int64
	expires int64
}

// record notes a grant of tokens of hash, given at now, until expires and
// returns its id, or 0 when the ledger is full of unexpired grants.
func (g *grantLedger) record(hash uint64, tokens, now, expires int64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[uint64]grantRecord{}
	}
	if len(g.m) >= g.max {
		g.sweepLocked(now)
		if len(g.m) >= g.max {
			return 0
		}
	}
	for {
		id := rand.Uint64() // unguessable: a forged return names no grant
		if _, dup := g.m[id]; id != 0 && !dup {
			g.m[id] = grantRecord{hash: hash, tokens: tokens, expires: expires}
			return id
		}
	}
}

// redeem ends grant id of hash and returns how many of n tokens may be
// credited: none if no such grant is recorded, or it has expired.
func (g *grantLedger) redeem(id, hash uint64, n, now int64) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.m[id]
	if !ok || r.hash != hash {
		return 0
	}
	delete(g.m, id)
	if now >= r.expires {
		return 0
	}
	return max(0, min(n, r.tokens))
}

// sweep drops expired grants.
func (g *grantLedger) sweep(now int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sweepLocked(now)
}

// sweepLocked drops grants expired by now. g.mu is held.
func (g *grantLedger) sweepLocked(now int64) {
	for id, r := range g.m {
		if now >= r.expires {
			delete(g.m, id)
		}
	}
}

// checkWithReturns decides forwarded items some of which are grant
// returns (items[i].Return set): those are redeemed against the ledger
// and credited on the key's owner, the others decided as checks.
func (l *Limiter) checkWithReturns(ctx context.Context, hops int, items []Forwarded, jobs []job, now int64) {
	var checks, credits []job
	var checkIdx, creditIdx []int
	for i, it := range items {
		j := jobs[i]
		if it.Return == 0 {
			checks, checkIdx = append(checks, j), append(checkIdx, i)
			continue
		}
		j.credit, j.upTo = true, false
		j.cost = l.ledger.redeem(it.Return, it.Hash, it.Cost, now)
		if j.cost == 0 {
			j.res.Result = bucket.Result{Allowed: true, Limit: it.Limit.Capacity()}
			continue
		}
		credits, creditIdx = append(credits, j), append(creditIdx, i)
	}
	v := l.view.Load()
	if len(checks) > 0 {
		l.decide(ctx, v, hops+1, hops >= 1, checks, now)
	}
	for k := range credits {
		j := &credits[k]
		j.granted = j.cost // credited in the background, as redeemed
		j.res.Result = bucket.Result{Allowed: true, Limit: j.limit.Capacity()}
	}
	if len(credits) > 0 {
		l.creditLater(ctx, credits)
	}
	for k, i := range checkIdx {
		jobs[i] = checks[k]
	}
	for k, i := range creditIdx {
		jobs[i] = credits[k]
	}
}

// credit applies credit jobs, redeemed already, on their keys' owners:
// from the issuer, as a first hop (the owner may forward once more). A
// credit for a key this node does not own waits for this node's HandOff
// to end, so that it never races the key's state on its way to the owner
// (a state pushed after the credit would undo it). A credit the owner
// refused (say, its partition still waits for a node that has not seen
// it join), or that certainly did not leave, is tried again, after a
// growing wait, until ctx ends (creditLater bounds it by returnTimeout);
// one that may have been applied is not.
func (l *Limiter) credit(ctx context.Context, jobs []job) {
	l.handoffMu.Lock()
	defer l.handoffMu.Unlock()
	todo := make([]int, len(jobs))
	for i := range todo {
		todo[i] = i
	}
	wait := creditRetryMin
	for {
		batch := make([]job, len(todo))
		for k, i := range todo {
			batch[k] = jobs[i]
			batch[k].res.Err = nil
		}
		l.decide(ctx, l.view.Load(), 0, false, batch, l.clock().UnixNano())
		var again []int
		for k, i := range todo {
			jobs[i] = batch[k]
			if batch[k].res.Err != nil && !batch[k].maybeApplied {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			return
		}
		if !sleepCtx(ctx, wait) {
			return
		}
		wait = min(2*wait, creditRetryMax)
		todo = again
	}
}

// sleepCtx waits for d, and reports false at once if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// The bounds of the wait before a refused credit is tried again.
const (
	creditRetryMin = 25 * time.Millisecond
	creditRetryMax = 250 * time.Millisecond
)

// returnTries is how many calls a grant return to an issuer on the ring
// makes, at most, while its deadline lasts.
const returnTries = 3

// returnTimeoutMin is the least time an issuer tries to credit a returned
// grant for. It credits only after its own HandOff, on the key's new
// owner, which refuses the issuer until its membership has seen it join:
// a gossip round or more on a busy cluster. Nothing waits on the credit
// (it runs in the background: credits.go).
const returnTimeoutMin = 5 * time.Second

// returnTimeout bounds the credit of a returned grant.
func (l *Limiter) returnTimeout() time.Duration {
	return max(4*l.fetchTimeout, returnTimeoutMin)
}

// returnGrant gives n unspent tokens of grant id of hash back to its
// issuer.
func (l *Limiter) returnGrant(ctx context.Context, hash uint64, lim bucket.Limit, issuer string, id uint64, n int64) (int64, error) {
	// The issuer answers once it has redeemed the return (it credits the
	// owner in the background: credits.go).
	rctx, cancel := context.WithTimeout(ctx, 4*l.fetchTimeout)
	defer cancel()
	if issuer == l.name {
		jobs := []job{{hash: hash, limit: lim, credit: true, cost: l.ledger.redeem(id, hash, n, l.clock().UnixNano())}}
		if jobs[0].cost > 0 {
			l.creditLater(rctx, jobs)
		}
		return jobs[0].cost, nil
	}
	to, ok := l.member(issuer)
	if !ok || l.peers == nil {
		return 0, fmt.Errorf("%w: grant issuer %q is not a member", ErrPeerUnavailable, issuer)
	}
	var ans [1]Answer
	err := l.peers.Check(rctx, to, 0, []Forwarded{{Hash: hash, Limit: lim, Cost: n, Return: id}}, ans[:])
	// A call to an issuer still on the ring that failed is sent again
	// while the deadline lasts (a busy issuer may answer past one call's
	// timeout): the issuer redeems a grant once, so a call that did arrive
	// makes the next credit nothing. An issuer off the ring (dead, cut off,
	// or gone) gets one call, so that a handoff after its loss is not held
	// up by returns to it.
	tries := 1
	if v := l.view.Load(); v != nil && v.ring != nil {
		if _, ok := v.ring.Member(issuer); ok {
			tries = returnTries
		}
	}
	for try := 1; err != nil && try < tries && sleepCtx(rctx, creditRetryMin<<try); try++ {
		err = l.peers.Check(rctx, to, 0, []Forwarded{{Hash: hash, Limit: lim, Cost: n, Return: id}}, ans[:])
	}
	if err == nil {
		err = ans[0].Err
	}
	if err != nil {
		l.log.Debug("grant return failed: its tokens lapse", "issuer", issuer, "tokens", n, "err", err)
		return 0, err
	}
	if ans[0].Granted < n {
		l.log.Debug("grant return credited less than returned", "issuer", issuer, "tokens", n, "credited", ans[0].Granted)
	}
	return ans[0].Granted, nil
}

// member finds a node by name on the ring, or among those that left it
// lately.
func (l *Limiter) member(name string) (ring.Member, bool) {
	if v := l.view.Load(); v != nil && v.ring != nil {
		if m, ok := v.ring.Member(name); ok {
			return m, true
		}
	}
	return l.departed.get(name, time.Now())
}

// ReturnGrants gives back the unspent tokens of every grant this node
// holds, waiting until ctx ends: the node calls it when it leaves.
func (l *Limiter) ReturnGrants(ctx context.Context) {
	l.grants.Return(ctx, l.clock().UnixNano())
}

// returnIdleGrants gives back the grants of keys unused for half the
// grant TTL: this node has stopped needing them.
func (l *Limiter) returnIdleGrants(now int64) {
	ctx, cancel := context.WithTimeout(context.Background(), l.fetchTimeout)
	defer cancel()
	l.grants.ReturnIdle(ctx, now, l.grants.Config().TTL/2)
}

// returnMovedGrants gives back the grants whose issuer is not the owner of
// their key on v any more.
func (l *Limiter) returnMovedGrants(ctx context.Context, v *view) {
	if l.leaving.Load() {
		l.ReturnGrants(ctx)
		return
	}
	l.grants.ReturnIf(ctx, l.clock().UnixNano(), func(key uint64, issuer string) bool {
		owner, _ := l.route(v, key)
		return owner.Name != issuer
	})
}
