package limitertest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
)

// Cluster is a set of real limiters, built by limiter.New with their own
// stores and one shared fake Clock, on one Network. Its methods drive
// membership the way package node does (SetMembers then HandOff on a ring
// change, SetLeaving, SetMembers and HandOff on a graceful leave), one step
// at a time, so that a test states the order in which nodes see changes.
// A Cluster is used from the test's goroutine; the limiters themselves may
// be called concurrently.
type Cluster struct {
	t testing.TB
	// Net is the network between the nodes; tests inject faults on it.
	Net *Network
	// Clock is the nodes' clock.
	Clock     *Clock
	configure func(*limiter.Config)
	epochs    *epochLog // nil without epochs (NewEpochCluster)
	mu        sync.Mutex
	nodes     map[string]*limiter.Limiter
}

// NewCluster builds a cluster of the named nodes and gives every node the
// ring of them all (SetMembers and HandOff, as on start). configure, if not
// nil, changes each node's Config before limiter.New (policies, grants,
// timeouts); NodeName, Clock and Peers are set by the Cluster. The
// limiters are closed when the test ends.
func NewCluster(t testing.TB, configure func(*limiter.Config), names ...string) *Cluster {
	t.Helper()
	c := newCluster(t, configure)
	c.start(names)
	return c
}

func newCluster(t testing.TB, configure func(*limiter.Config)) *Cluster {
	c := &Cluster{t: t, Net: NewNetwork(1), Clock: NewClock(Epoch), configure: configure, nodes: map[string]*limiter.Limiter{}}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, l := range c.nodes {
			l.Close()
		}
	})
	return c
}

// start adds names and gives them the ring of them all.
func (c *Cluster) start(names []string) {
	c.t.Helper()
	for _, name := range names {
		c.Add(name)
	}
	if len(names) > 0 {
		c.SetMembers(names...)
	}
}

// Add builds node name and attaches it to the network. Its ring is itself
// alone (as a node that has started but not joined) until SetRing or
// SetMembers gives it another.
func (c *Cluster) Add(name string) *limiter.Limiter {
	c.t.Helper()
	// The network stands for authenticated peer channels (the cluster
	// secret or peer mTLS), the default of a cluster.
	cfg := limiter.Config{Logger: slog.New(slog.DiscardHandler), PeersAuthenticated: true}
	if c.configure != nil {
		c.configure(&cfg)
	}
	if c.epochs != nil {
		c.epochs.configure(c, name, &cfg)
		c.epochs.set(name, 0) // a new process: not routing by epochs yet
	}
	cfg.NodeName, cfg.Clock, cfg.Peers = name, c.Clock.Now, c.Net.Peers(name)
	l, err := limiter.New(cfg)
	if err != nil {
		c.t.Fatalf("limitertest: limiter.New(%s): %v", name, err)
	}
	if err := l.SetMembers([]ring.Member{member(name)}); err != nil {
		c.t.Fatalf("limitertest: %s: SetMembers(self): %v", name, err)
	}
	c.mu.Lock()
	if old := c.nodes[name]; old != nil {
		old.Close()
	}
	c.nodes[name] = l
	c.mu.Unlock()
	c.Net.Attach(name, l)
	return l
}

// Remove stops node name: it is detached from the network (calls to it
// fail) and closed. Its state is lost, as when a process exits.
func (c *Cluster) Remove(name string) {
	c.t.Helper()
	c.Net.Detach(name)
	if c.epochs != nil {
		c.epochs.forget(name)
	}
	c.mu.Lock()
	l := c.nodes[name]
	delete(c.nodes, name)
	c.mu.Unlock()
	if l == nil {
		c.t.Fatalf("limitertest: Remove(%s): no such node", name)
	}
	l.Close()
}

// Node returns the limiter of node name.
func (c *Cluster) Node(name string) *limiter.Limiter {
	c.t.Helper()
	c.mu.Lock()
	l := c.nodes[name]
	c.mu.Unlock()
	if l == nil {
		c.t.Fatalf("limitertest: no node %s", name)
	}
	return l
}

// Names returns the nodes' names, sorted.
func (c *Cluster) Names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.nodes))
	for name := range c.nodes {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// SetRing gives node on the ring of members (SetMembers only, as
// node.onMembership does on a gossip change, or ringLoop on applying an
// epoch), without handing off. In an epoch Cluster the ring is an epoch
// (see NewEpochCluster), which the node has applied once SetRing returns.
func (c *Cluster) SetRing(on string, members ...string) {
	c.t.Helper()
	var n uint64
	if c.epochs != nil {
		n = c.epochs.number(on, members)
	}
	if err := c.setRing(on, members, n); err != nil {
		c.t.Fatalf("limitertest: %s: SetMembers(%v): %v", on, members, err)
	}
}

// setRing gives node on the ring of members and, if epoch is not 0 and
// ahead of the node's, records it as applied. Safe from any goroutine.
func (c *Cluster) setRing(on string, members []string, epoch uint64) error {
	c.mu.Lock()
	l := c.nodes[on]
	c.mu.Unlock()
	if l == nil {
		return fmt.Errorf("no node %s", on)
	}
	ms := make([]ring.Member, len(members))
	for i, m := range members {
		ms[i] = member(m)
	}
	if c.epochs == nil {
		return l.SetMembers(ms)
	}
	c.epochs.setMu.Lock()
	defer c.epochs.setMu.Unlock()
	if epoch != 0 && c.epochs.load(on) >= epoch {
		return nil // caught up meanwhile
	}
	if err := l.SetMembers(ms); err != nil {
		return err
	}
	if epoch != 0 {
		c.epochs.set(on, epoch)
	}
	return nil
}

// HandOff runs node on's handoff (as node.handoffLoop does after a ring
// change) and returns how many states moved and its error.
func (c *Cluster) HandOff(on string) (int, error) {
	c.t.Helper()
	return c.Node(on).HandOff(context.Background())
}

// SetMembers gives every listed node the ring of them all, then runs each
// one's handoff, in the order listed: a membership change that every
// member has seen before any state moves.
func (c *Cluster) SetMembers(members ...string) {
	c.t.Helper()
	for _, m := range members {
		c.SetRing(m, members...)
	}
	for _, m := range members {
		if _, err := c.HandOff(m); err != nil {
			c.t.Fatalf("limitertest: %s: HandOff: %v", m, err)
		}
	}
}

// Leave makes node name leave gracefully as node.shutdown does: it refuses
// handoffs from now on, takes the ring of others (the members it still
// sees, without itself), and hands every state to its owner there. It
// stays attached, answering forwarded calls, until Remove. It returns the
// handoff's error.
func (c *Cluster) Leave(name string, others ...string) error {
	c.t.Helper()
	l := c.Node(name)
	l.SetLeaving()
	if c.epochs != nil {
		c.epochs.forget(name) // it routes by no epoch from now on
	}
	// Its own ring, no epoch's (it may never apply the one removing it).
	if err := c.setRing(name, others, 0); err != nil {
		c.t.Fatalf("limitertest: %s: SetMembers(%v): %v", name, others, err)
	}
	_, err := l.HandOff(context.Background())
	return err
}

// member is node name's ring.Member; the network routes by name, so the
// address is only a label.
func member(name string) ring.Member { return ring.Member{Name: name, GRPCAddr: "mem:" + name} }

// Check decides reqs on node on and fails the test if the call fails.
func (c *Cluster) Check(on string, reqs ...limiter.Request) []limiter.Result {
	c.t.Helper()
	res, err := c.Node(on).Check(context.Background(), reqs, nil)
	if err != nil {
		c.t.Fatalf("limitertest: %s: Check: %v", on, err)
	}
	return res
}

// Owner returns the owner of req's key by node on's ring, computing the
// key's identity as the limiter does (the named policy's, else the inline
// limit's).
func (c *Cluster) Owner(on string, req limiter.Request) string {
	c.t.Helper()
	l := c.Node(on)
	var hash uint64
	if req.Policy != "" {
		p, ok := l.Policies().Lookup(req.Policy)
		if !ok {
			c.t.Fatalf("limitertest: %s: no policy %q", on, req.Policy)
		}
		hash = identity.Policy(uint8(p.Limit.Algorithm), p.Name, req.Key)
	} else if req.Limit.Calendar != 0 {
		zone := req.Timezone
		if zone == "" {
			zone = req.Limit.Zone.String()
		}
		hash = identity.Calendar(uint8(req.Limit.Algorithm), uint8(req.Limit.Calendar), zone, req.Key)
	} else {
		hash = identity.Inline(uint8(req.Limit.Algorithm), req.Limit.Period, req.Key)
	}
	m, ok := l.Ring().Owner(hash)
	if !ok {
		return on
	}
	return m.Name
}

// KeysOwnedBy returns n keys "prefix:i" that node owner owns by node on's
// ring under req's limit (req.Key is ignored).
func (c *Cluster) KeysOwnedBy(on, owner, prefix string, req limiter.Request, n int) []string {
	c.t.Helper()
	var out []string
	for i := 0; len(out) < n && i < 100*n+1000; i++ {
		req.Key = fmt.Sprintf("%s:%d", prefix, i)
		if c.Owner(on, req) == owner {
			out = append(out, req.Key)
		}
	}
	if len(out) < n {
		c.t.Fatalf("limitertest: found %d keys owned by %s, want %d", len(out), owner, n)
	}
	return out
}
