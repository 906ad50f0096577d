package limitertest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/sluice-rl/sluice/limiter"
)

// stamp marks ctx with the epoch of node p.from (limiter.Limiter.Epoch: 0
// for a limiter without Config.Epoch), as the transport stamps the calls
// it sends, for the target's server-side method.
func (p *peers) stamp(ctx context.Context) context.Context {
	p.n.mu.Lock()
	l := p.n.nodes[p.from]
	p.n.mu.Unlock()
	if l == nil {
		return ctx
	}
	return limiter.WithSenderEpoch(ctx, l.Epoch())
}

// NewEpochCluster is NewCluster with the ring's epochs on, as package
// node runs them: the rings the test gives nodes (SetRing, SetMembers) are
// the epochs of one log, numbered in the order the test first uses each
// ring (a node never goes back: a ring it had before, given again, is a
// new epoch). Each node's limiter.Config.Epoch is the epoch of the ring
// it was given last (0 until it is given one with more than itself, as a
// node not yet routing by epochs), and WaitEpoch catches it up as the
// group's log would: a node asked to wait for epoch e that is on e's ring
// is given that ring at once (SetMembers, without a handoff: the test
// runs handoffs), as node's ringLoop does on applying it. A leaving node
// (Leave) has no epoch, as in package node.
func NewEpochCluster(t testing.TB, configure func(*limiter.Config), names ...string) *Cluster {
	t.Helper()
	c := newCluster(t, configure)
	c.epochs = &epochLog{applied: map[string]uint64{}, changed: make(chan struct{})}
	c.start(names)
	return c
}

// epochLog is the epochs of an epoch Cluster: rings[i] is epoch i+1's
// members, sorted.
type epochLog struct {
	mu      sync.Mutex
	rings   [][]string
	applied map[string]uint64
	changed chan struct{} // closed when an applied epoch changes
	setMu   sync.Mutex    // a node's SetMembers from catch-ups and the test
}

// number returns the epoch of ring members for node name: the first
// epoch after the node's with that ring, else a new one. A node that has
// applied none (a new process) starts from the oldest epoch a node routes
// by: it applies the group's log from the first epoch, and a burst makes
// one ring.
func (e *epochLog) number(name string, members []string) uint64 {
	ms := slices.Sorted(slices.Values(members))
	e.mu.Lock()
	defer e.mu.Unlock()
	from := e.applied[name]
	if from == 0 {
		oldest := uint64(0)
		for n, a := range e.applied {
			if n != name && a > 0 && (oldest == 0 || a < oldest) {
				oldest = a
			}
		}
		from = max(oldest, 1) - 1
	}
	for i := int(from); i < len(e.rings); i++ {
		if slices.Equal(e.rings[i], ms) {
			return uint64(i + 1)
		}
	}
	e.rings = append(e.rings, ms)
	return uint64(len(e.rings))
}

// ring returns epoch n's members, or nil if the log has no epoch n.
func (e *epochLog) ring(n uint64) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n == 0 || n > uint64(len(e.rings)) {
		return nil
	}
	return e.rings[n-1]
}

func (e *epochLog) load(name string) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applied[name]
}

// forget drops node name's epoch: it has left or stopped.
func (e *epochLog) forget(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.applied, name)
}

func (e *epochLog) set(name string, n uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applied[name] = n
	close(e.changed)
	e.changed = make(chan struct{})
}

// configure sets node name's Epoch and WaitEpoch.
func (e *epochLog) configure(c *Cluster, name string, cfg *limiter.Config) {
	cfg.Epoch = func() uint64 { return e.load(name) }
	cfg.WaitEpoch = func(ctx context.Context, n uint64) error {
		if e.load(name) < n {
			if ms := e.ring(n); slices.Contains(ms, name) {
				c.setRing(name, ms, n)
			}
		}
		for {
			e.mu.Lock()
			cur, ch := e.applied[name], e.changed
			e.mu.Unlock()
			if cur >= n {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ch:
			}
		}
	}
}
