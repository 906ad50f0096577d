package limitertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Any matches every node in a fault's from or to.
const Any = "*"

// Network connects limiters in memory. A call through the limiter.Peers of
// node from (Peers) is delivered to the target limiter's server-side
// method (CheckForwarded, AcquireForwarded, ReleaseForwarded, FetchMoved,
// AcceptHandoff: the ones the gRPC peer server calls) on the caller's
// goroutine, unless a fault stops it: then it returns an error wrapping
// limiter.ErrPeerUnavailable and the target sees nothing. Faults apply
// per link, one way (from -> to), and last until Heal. All methods are safe
// for concurrent use.
type Network struct {
	mu       sync.Mutex
	nodes    map[string]*limiter.Limiter
	cut      map[link]bool
	drop     map[link]float64
	delay    map[link]time.Duration
	lose     map[link]func()
	fails    map[link]int
	hooks    map[hookKey]func()
	isolated map[string]bool
	rng      *rand.Rand
	calls    map[link]*Counts
}

type link struct{ from, to string }

// Counts are the calls delivered on a link, by method.
type Counts struct {
	Check, Acquire, Release, Fetch, Handoff, Replicate int
}

// Total is the number of calls of every method.
func (c Counts) Total() int {
	return c.Check + c.Acquire + c.Release + c.Fetch + c.Handoff + c.Replicate
}

type method int

const (
	mCheck method = iota
	mAcquire
	mRelease
	mFetch
	mHandoff
	mReplicate
	mAdmin // not counted
)

// NewNetwork returns an empty network. seed drives Drop's choices, so a
// test that drops a fraction of calls drops the same ones each run (for
// the same order of calls).
func NewNetwork(seed uint64) *Network {
	return &Network{
		nodes:    map[string]*limiter.Limiter{},
		cut:      map[link]bool{},
		drop:     map[link]float64{},
		delay:    map[link]time.Duration{},
		lose:     map[link]func(){},
		fails:    map[link]int{},
		hooks:    map[hookKey]func(){},
		isolated: map[string]bool{},
		rng:      rand.New(rand.NewPCG(seed, seed^0x5eed)),
		calls:    map[link]*Counts{},
	}
}

// Attach makes l reachable as node name, replacing any limiter attached
// under that name.
func (n *Network) Attach(name string, l *limiter.Limiter) {
	n.mu.Lock()
	n.nodes[name] = l
	n.mu.Unlock()
}

// Detach makes node name unreachable, as if its process had stopped:
// calls to it fail from now on.
func (n *Network) Detach(name string) {
	n.mu.Lock()
	delete(n.nodes, name)
	n.mu.Unlock()
}

// Peers returns the limiter.Peers of node from: its calls go over this
// network as from.
func (n *Network) Peers(from string) limiter.Peers { return &peers{n: n, from: from} }

// Drop makes each call from -> to fail with probability p (1 drops them
// all). from or to may be Any: Drop(Any, "n2", 1) makes n2 look down to
// everyone while it can still call out.
func (n *Network) Drop(from, to string, p float64) {
	n.mu.Lock()
	n.drop[link{from, to}] = p
	n.mu.Unlock()
}

// Delay holds each call from -> to for d (real time) before delivering it.
// A call whose context ends first is not delivered: it fails with an
// error wrapping limiter.ErrPeerUnavailable and the context's error.
// from or to may be Any.
func (n *Network) Delay(from, to string, d time.Duration) {
	n.mu.Lock()
	n.delay[link{from, to}] = d
	n.mu.Unlock()
}

// FailChecks makes the next k Check calls from -> to fail as dropped
// calls do: the target sees nothing. Later calls, and calls of other
// methods, pass. Heal removes what is left of it.
func (n *Network) FailChecks(from, to string, k int) {
	n.mu.Lock()
	n.fails[link{from, to}] = k
	n.mu.Unlock()
}

// Cut stops every call between a and b, both ways.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	n.cut[link{a, b}], n.cut[link{b, a}] = true, true
	n.mu.Unlock()
}

// CutOneWay stops every call from -> to; calls to -> from still pass.
func (n *Network) CutOneWay(from, to string) {
	n.mu.Lock()
	n.cut[link{from, to}] = true
	n.mu.Unlock()
}

// Isolate stops every call to and from node name.
func (n *Network) Isolate(name string) {
	n.mu.Lock()
	n.isolated[name] = true
	n.mu.Unlock()
}

// Heal removes every fault: drops, delays, failures to come, lost answers, handoff and fetch hooks,
// cuts and isolations. Detached nodes stay detached.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.cut)
	clear(n.drop)
	clear(n.delay)
	clear(n.lose)
	clear(n.fails)
	clear(n.hooks)
	clear(n.isolated)
	n.mu.Unlock()
}

// Calls returns the calls delivered from -> to so far; from or to may be
// Any.
func (n *Network) Calls(from, to string) Counts {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out Counts
	for l, c := range n.calls {
		if (from == Any || l.from == from) && (to == Any || l.to == to) {
			out.Check += c.Check
			out.Acquire += c.Acquire
			out.Release += c.Release
			out.Fetch += c.Fetch
			out.Handoff += c.Handoff
		}
	}
	return out
}

// unavailable is the error of a call that did not reach its target.
func unavailable(from, to, why string) error {
	return fmt.Errorf("%w: %w: %s -> %s: %s", limiter.ErrPeerUnavailable, limiter.ErrNotSent, from, to, why)
}

// LoseAnswers makes each Check from -> to reach its target and be applied
// there, then fail at the caller as if the answer never came back (the
// caller's deadline passed while the target was slow): the caller cannot
// know whether it was applied, so the error does not wrap
// limiter.ErrNotSent. then, if not nil, runs after the target applied the
// call and before the caller sees the failure (to change the caller's ring
// meanwhile, say). Heal removes it.
func (n *Network) LoseAnswers(from, to string, then func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if then == nil {
		then = func() {}
	}
	n.lose[link{from, to}] = then
}

// lost returns the LoseAnswers hook of from -> to, if any.
func (n *Network) lost(from, to string) (func(), bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range links(from, to) {
		if f, ok := n.lose[k]; ok {
			return f, true
		}
	}
	return nil, false
}

// BeforeHandoff runs then once, on the next Handoff call from -> to that
// carries states: once the call is on its way and before the target sees
// it (to read the keys elsewhere while their states travel, say). Heal
// removes it if it has not run.
func (n *Network) BeforeHandoff(from, to string, then func()) {
	n.setHook(from, to, false, then)
}

// AfterHandoff runs then once, on the next Handoff call from -> to that
// carries states: after the target has accepted them and before the caller
// sees its answer (to have the target hand them back meanwhile, say).
// Heal removes it if it has not run.
func (n *Network) AfterHandoff(from, to string, then func()) {
	n.setHook(from, to, true, then)
}

// AfterFetch runs then once, on the next Fetch call from -> to: after the
// target has answered and before the caller sees the answer (to change the
// caller's ring while it waits for a key's state, say). Heal removes it if
// it has not run.
func (n *Network) AfterFetch(from, to string, then func()) {
	n.setHookOf(mFetch, from, to, true, then)
}

// hookKey names a hook: BeforeHandoff (mHandoff, after false),
// AfterHandoff (mHandoff, after true) or AfterFetch (mFetch, after true).
type hookKey struct {
	link
	m     method
	after bool
}

func (n *Network) setHook(from, to string, after bool, then func()) {
	n.setHookOf(mHandoff, from, to, after, then)
}

func (n *Network) setHookOf(m method, from, to string, after bool, then func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hooks[hookKey{link{from, to}, m, after}] = then
}

// runHook removes and runs the Handoff hook of from -> to, if any.
func (n *Network) runHook(from, to string, after bool) {
	n.runHookOf(mHandoff, from, to, after)
}

// runHookOf removes and runs the hook of method m on from -> to, if any.
func (n *Network) runHookOf(m method, from, to string, after bool) {
	k := hookKey{link{from, to}, m, after}
	n.mu.Lock()
	f := n.hooks[k]
	delete(n.hooks, k)
	n.mu.Unlock()
	if f != nil {
		f()
	}
}

// links lists the fault keys that match from -> to.
func links(from, to string) [4]link {
	return [4]link{{from, to}, {Any, to}, {from, Any}, {Any, Any}}
}

// deliver applies the faults of from -> to to one call and returns the
// target, or the error the caller sees.
func (n *Network) deliver(ctx context.Context, from, to string, m method) (*limiter.Limiter, error) {
	n.mu.Lock()
	var wait time.Duration
	var why string
	switch {
	case n.isolated[from]:
		why = from + " is isolated"
	case n.isolated[to]:
		why = to + " is isolated"
	case n.cut[link{from, to}]:
		why = "link cut"
	case m == mCheck && n.fails[link{from, to}] > 0:
		n.fails[link{from, to}]--
		why = "failed (FailChecks)"
	}
	if why == "" {
		p := 0.0
		for _, k := range links(from, to) {
			p = max(p, n.drop[k])
			wait = max(wait, n.delay[k])
		}
		if p > 0 && n.rng.Float64() < p {
			why = "dropped"
		}
	}
	n.mu.Unlock()
	if why != "" {
		return nil, unavailable(from, to, why)
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %w: %s -> %s: delayed past the caller's deadline: %w", limiter.ErrPeerUnavailable, limiter.ErrNotSent, from, to, ctx.Err())
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w: %s -> %s: %w", limiter.ErrPeerUnavailable, limiter.ErrNotSent, from, to, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.nodes[to]
	if l == nil {
		return nil, unavailable(from, to, "no such node")
	}
	c := n.calls[link{from, to}]
	if c == nil {
		c = &Counts{}
		n.calls[link{from, to}] = c
	}
	switch m {
	case mCheck:
		c.Check++
	case mAcquire:
		c.Acquire++
	case mRelease:
		c.Release++
	case mFetch:
		c.Fetch++
	case mHandoff:
		c.Handoff++
	case mReplicate:
		c.Replicate++
	}
	return l, nil
}

// peers is one node's limiter.Peers on a Network.
type peers struct {
	n    *Network
	from string
}

func (p *peers) Check(ctx context.Context, to ring.Member, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	l, err := p.n.deliver(ctx, p.from, to.Name, mCheck)
	if err != nil {
		return err
	}
	if err := l.CheckForwarded(p.stamp(ctx), p.from, hops, items, out); err != nil {
		return refused(to.Name, err)
	}
	if then, ok := p.n.lost(p.from, to.Name); ok {
		then()
		return fmt.Errorf("%w: %s -> %s: answer lost", limiter.ErrPeerUnavailable, p.from, to.Name)
	}
	return nil
}

func (p *peers) Acquire(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error) {
	l, err := p.n.deliver(ctx, p.from, to.Name, mAcquire)
	if err != nil {
		return limiter.Answer{}, store.LeaseID{}, err
	}
	a, id, err := l.AcquireForwarded(p.stamp(ctx), p.from, hops, item, ttl)
	return a, id, refused(to.Name, err)
}

func (p *peers) Release(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, leaseID store.LeaseID) (limiter.Answer, bool, error) {
	l, err := p.n.deliver(ctx, p.from, to.Name, mRelease)
	if err != nil {
		return limiter.Answer{}, false, err
	}
	a, ok, err := l.ReleaseForwarded(p.stamp(ctx), p.from, hops, item, leaseID)
	return a, ok, refused(to.Name, err)
}

func (p *peers) Reserve(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, ttl time.Duration) (limiter.Answer, store.LeaseID, error) {
	l, err := p.n.deliver(ctx, p.from, to.Name, mAcquire)
	if err != nil {
		return limiter.Answer{}, store.LeaseID{}, err
	}
	a, id, err := l.ReserveForwarded(p.stamp(ctx), p.from, hops, item, ttl)
	return a, id, refused(to.Name, err)
}

func (p *peers) Settle(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, id store.LeaseID) (limiter.Answer, limiter.SettleAnswer, error) {
	l, err := p.n.deliver(ctx, p.from, to.Name, mRelease)
	if err != nil {
		return limiter.Answer{}, limiter.SettleAnswer{}, err
	}
	a, sa, err := l.SettleForwarded(p.stamp(ctx), p.from, hops, item, id)
	return a, sa, refused(to.Name, err)
}

func (p *peers) Admin(ctx context.Context, to ring.Member, hops int, item limiter.Forwarded, op limiter.AdminOp) (limiter.KeyInfo, error) {
	l, err := p.n.deliver(ctx, p.from, to.Name, mAdmin)
	if err != nil {
		return limiter.KeyInfo{}, err
	}
	info, err := l.AdminForwarded(p.stamp(ctx), p.from, hops, item, op)
	return info, refused(to.Name, err)
}

func (p *peers) CheckAtomic(ctx context.Context, to ring.Member, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	l, err := p.n.deliver(ctx, p.from, to.Name, mCheck)
	if err != nil {
		return err
	}
	if err := l.CheckAtomicForwarded(p.stamp(ctx), p.from, hops, items, out); err != nil && !errors.Is(err, limiter.ErrAtomicElsewhere) {
		return refused(to.Name, err)
	} else {
		return err
	}
}

func (p *peers) Fetch(ctx context.Context, from ring.Member, hashes []uint64) ([]store.Entry, error) {
	if len(hashes) == 0 {
		return nil, nil
	}
	l, err := p.n.deliver(ctx, p.from, from.Name, mFetch)
	if err != nil {
		return nil, err
	}
	entries, err := l.FetchMoved(p.stamp(ctx), p.from, hashes)
	p.n.runHookOf(mFetch, p.from, from.Name, true)
	return entries, refused(from.Name, err)
}

func (p *peers) Handoff(ctx context.Context, to ring.Member, entries []store.Entry, donePartitions []int) error {
	if len(entries) == 0 && len(donePartitions) == 0 {
		return nil
	}
	l, err := p.n.deliver(ctx, p.from, to.Name, mHandoff)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		p.n.runHook(p.from, to.Name, false)
	}
	if _, err := l.AcceptHandoff(p.stamp(ctx), p.from, entries, donePartitions); err != nil {
		// As the gRPC peer client reports a receiver that is leaving.
		return fmt.Errorf("%w: %s: %w", limiter.ErrPeerUnavailable, to.Name, err)
	}
	if len(entries) > 0 {
		p.n.runHook(p.from, to.Name, true)
	}
	return nil
}

func (p *peers) Replicate(ctx context.Context, to ring.Member, entries []store.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	l, err := p.n.deliver(ctx, p.from, to.Name, mReplicate)
	if err != nil {
		return err
	}
	_, err = l.AcceptReplicas(p.stamp(ctx), p.from, entries)
	return refused(to.Name, err)
}

// refused reports a peer call that node to refused (its caller is not a
// member of its ring) as the gRPC peer client does: the owner is
// unavailable to this caller.
func refused(to string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %s: %w", limiter.ErrPeerUnavailable, to, err)
}
