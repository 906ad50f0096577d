package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrShutdown is returned by the methods of a Cluster that was shut down.
var ErrShutdown = errors.New("cluster: shut down")

// ErrMetaNotConfirmed is UpdateMeta's error when its timeout passes
// before memberlist has sent the change out as often as it sends every
// broadcast. The change is made all the same: it is this node's metadata,
// still queued for gossip and carried by every push/pull, so the others
// learn it later. A caller treats it as a warning, never as a failure.
var ErrMetaNotConfirmed = errors.New("cluster: metadata change not yet confirmed broadcast")

// Cluster is this node's membership in a gossip cluster: one memberlist
// instance, its member table and snapshots.
//
// All methods are safe for concurrent use. Run may be called once; every
// other method may be called before, during and after Run. Config.OnChange
// is only called from Run.
type Cluster struct {
	cfg       Config // validated, with defaults
	log       *slog.Logger
	ml        *memberlist.Memberlist
	mlReady   atomic.Pointer[memberlist.Memberlist] // ml, once Create returned: for memberlist's own goroutines
	name      string
	gossip    string          // advertised "ip:port"
	self      map[string]bool // addresses that reach this node, skipped as seeds
	departFor time.Duration   // how long State remembers departed members
	keys      *keys           // the gossip keyring, if encrypted
	transport *muteTransport  // memberlist's, with the MuteGossip fault switch

	susp       *suspicion    // which members do not answer this node's probes (suspicion.go)
	probeEvery time.Duration // the interval of this node's probes: half memberlist's

	changed chan struct{} // buffer 1: the member table changed
	done    chan struct{} // closed by Shutdown

	undecrypted  atomic.Uint64 // gossip no key decrypted (refusals.go)
	refusedAlone atomic.Uint64 // nodes a node alone refused (refusals.go)

	running atomic.Bool // Run was called
	left    atomic.Bool // Leave was called: stop joining
	joined  atomic.Bool // a seed answered, another member reached us, or there were no seeds
	// joinGen is odd while this node's first join (memberlist.Join, whose
	// push/pull brings the seed's members one at a time) is in flight, and
	// counts those joins: Run delivers no snapshot taken during one.
	joinGen atomic.Uint64

	// lifecycle serializes Leave, UpdateMeta and Shutdown: memberlist
	// panics on a Leave after Shutdown.
	lifecycle sync.Mutex
	shut      bool // guarded by lifecycle

	protocol *protocolGate // admits members by peer protocol (protocol.go)

	metaMu  sync.Mutex
	metaVal NodeMeta // local metadata, guarded by metaMu
	meta    []byte   // metaVal encoded, guarded by metaMu

	// mu guards the member table, fed by memberlist's notifications (see
	// delegate.go), and the snapshot built from it.
	mu       sync.Mutex
	members  map[string]Member    // live members by name
	leaving  map[string]bool      // members whose metadata says they are leaving
	departed map[string]departure // dead or left members, for State
	dirty    bool                 // members changed since snap was built
	snap     Snapshot
	// joinSuspects is, while this node's first join is in flight, the
	// members the seeds' push/pull reported suspect (name -> gossip
	// address), for contactSuspects; nil otherwise.
	joinSuspects map[string]string
}

// departure records when and how a member went away.
type departure struct {
	state State // Dead or Left
	at    time.Time
}

// New validates cfg and creates the memberlist: it binds the gossip port
// and starts memberlist's goroutines, but contacts no one: Run joins. The
// caller must call Shutdown to release the port and the goroutines.
//
// Configuration errors are *ConfigError values (several are joined with
// errors.Join), each naming its field and wrapping ErrInvalidConfig.
func New(cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	meta, err := cfg.Meta.encode(false)
	if err != nil { // checked by validate
		return nil, &ConfigError{Field: "Meta", Reason: err.Error()}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	gk, err := newKeys(cfg.GossipKeyFile, cfg.GossipKeys)
	if err != nil {
		return nil, err
	}

	c := &Cluster{
		cfg:      cfg,
		log:      logger,
		name:     cfg.NodeName,
		changed:  make(chan struct{}, 1),
		done:     make(chan struct{}),
		protocol: newProtocolGate(cfg.NodeName, cfg.Meta.Protocol, logger),
		metaVal:  cfg.Meta,
		meta:     meta,
		members:  make(map[string]Member),
		leaving:  make(map[string]bool),
		departed: make(map[string]departure),
		keys:     gk,
	}

	mc := cfg.memberlistConfig()
	mc.Delegate = delegate{c}
	mc.Events = events{c}
	mc.Conflict = events{c}
	mc.Merge = events{c}
	mc.Logger = newMemberlistLogger(c.log, c.noteMemberlistLine)
	mc.Alive = events{c}
	gk.configure(mc)
	c.departFor = mc.GossipToTheDeadTime
	c.probeEvery = mc.ProbeInterval / 2
	c.susp = newSuspicion(SuspectAfterProbes, mc.ProbeInterval+mc.ProbeTimeout, time.Now)
	if c.transport, err = newMuteTransport(mc); err != nil {
		return nil, fmt.Errorf("cluster: start memberlist on %s: %w", cfg.BindAddr, err)
	}
	if cfg.Alone {
		c.transport.refuseAll(c.refuseStream)
	}

	ml, err := memberlist.Create(mc)
	if err != nil {
		_ = c.transport.Shutdown()
		return nil, fmt.Errorf("cluster: start memberlist on %s: %w", cfg.BindAddr, err)
	}
	c.ml = ml
	c.mlReady.Store(ml)

	// memberlist announced this node to itself during Create.
	c.mu.Lock()
	me, ok := c.members[c.name]
	c.mu.Unlock()
	if !ok {
		_ = ml.Shutdown()
		return nil, errors.New("cluster: memberlist did not announce the local node")
	}
	c.gossip = me.GossipAddr
	// memberlist wrote the port it bound into mc.BindPort.
	c.self = selfAddrs(c.gossip, net.ParseIP(mc.BindAddr), uint16(mc.BindPort))
	c.Snapshot() // version 1: this node alone
	c.log.Debug("cluster: gossip listening", "addr", c.gossip, "preset", cfg.Preset, "encrypted", gk.ring != nil)
	return c, nil
}

// Run joins the cluster and then delivers membership snapshots to
// Config.OnChange until ctx is done or Shutdown is called; it returns nil
// then. It returns an error at once if called a second time or after
// Shutdown.
//
// Joining: with no seeds (Config.Join empty) this node is a cluster of one
// that others may join. Otherwise Run contacts every seed address, again
// every Config.JoinRetry until one answers or another member contacts this
// node first, and then, every Config.Rejoin, contacts the seed addresses
// that are not members (see Config.Rejoin). Snapshots are delivered from
// the start, while joining, but none taken while this node's own join
// merges a seed's members, which arrive one at a time: the first snapshot
// after a join lists the whole membership the seed gave, the members the
// seed suspects included (the join contacts those itself; see the package
// documentation, "Seeds and Kubernetes"). Leave stops joining. With
// Config.GossipKeyFile,
// Run also watches the key file and reloads the keyring when it changes
// (see ReloadGossipKeys).
//
// Run returns an error wrapping ErrNameTaken, having left no one (no
// member accepted this node), when a seed's cluster has a live member of
// this node's NodeName at another address.
//
// Run also probes every other member once per memberlist probe interval
// and reports those that stop answering Suspect (see the package
// documentation, "Suspicion").
//
// Run owns every goroutine it starts and returns only once they are done;
// a join attempt in flight when ctx ends is not interrupted by memberlist,
// so Run may take up to memberlist's TCP timeout (1s local, 10s lan) to
// return when a seed address does not answer at all, and as long again
// when a member the seed suspects does not answer either.
func (c *Cluster) Run(ctx context.Context) (err error) {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("cluster: Run called more than once")
	}
	select {
	case <-c.done:
		return ErrShutdown
	default:
	}

	ctx, cancel := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		joinErr error // set by the join goroutine before it cancels ctx
	)
	defer func() {
		cancel()
		wg.Wait()
		if joinErr != nil {
			err = joinErr
		}
	}()
	if c.keys.path != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.watchKeys(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.probeLoop(ctx.Done())
	}()
	if len(c.cfg.Join) == 0 {
		c.joined.Store(true)
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.joinLoop(ctx); err != nil {
				joinErr = err
				cancel()
			}
		}()
	}

	var delivered uint64
	for {
		// A snapshot taken while a join merges the seed's members would
		// list some of them (a joiner's first snapshot, above all, which
		// is not settled): it is delivered only if no join was in flight
		// before or after it was taken; the join's end wakes this loop.
		g := c.joinGen.Load()
		if s := c.Snapshot(); s.Version != delivered && g%2 == 0 && c.joinGen.Load() == g {
			delivered = s.Version
			if c.cfg.OnChange != nil {
				c.cfg.OnChange(s)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.done:
			return nil
		case <-c.changed:
		}
		if !c.settle(ctx) {
			return nil
		}
	}
}

// settleMaxFactor bounds the wait of settle: a membership that keeps
// changing is delivered after settleMaxFactor times Config.Settle.
const settleMaxFactor = 10

// settle waits, after a change, until the membership has not changed for
// Config.Settle, or for settleMaxFactor times that at most (see
// Config.Settle). It reports false once Run must return.
func (c *Cluster) settle(ctx context.Context) bool {
	if c.cfg.Settle <= 0 {
		return true
	}
	limit := time.NewTimer(settleMaxFactor * c.cfg.Settle)
	defer limit.Stop()
	quiet := time.NewTimer(c.cfg.Settle)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-c.done:
			return false
		case <-limit.C:
			return true
		case <-quiet.C:
			return true
		case <-c.changed:
			quiet.Reset(c.cfg.Settle)
		}
	}
}

// Joined reports whether this node has joined its cluster: a seed
// answered, another member contacted it, or it was given no seeds (a
// cluster of one). A node that has not joined yet would own every key, so
// it should not report ready.
func (c *Cluster) Joined() bool { return c.joined.Load() }

// Snapshot returns the current membership. It is cheap when nothing
// changed since the last call (a lock and a four-word copy); it works with
// or without Run.
func (c *Cluster) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty || c.snap.Version == 0 {
		c.dirty = false
		members := sortedMembers(c.members)
		if c.snap.Version == 0 || !slices.Equal(members, c.snap.Members) {
			c.snap = Snapshot{Version: c.snap.Version + 1, Members: members}
		}
		now := time.Now()
		for name, d := range c.departed {
			if now.Sub(d.at) > c.departFor {
				delete(c.departed, name)
			}
		}
	}
	return c.snap
}

// State returns the current state of the member called name: Alive or
// Suspect for a member, Dead or Left for one that went away in
// the last GossipToTheDeadTime of memberlist (30s lan, 5s local), and false
// for a name this node does not know (or no longer remembers). It reads the
// member table directly, so it is current even between snapshots.
func (c *Cluster) State(name string) (State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.members[name]; ok {
		return m.State, true
	}
	if d, ok := c.departed[name]; ok {
		return d.state, true
	}
	return 0, false
}

// LocalName returns this node's name, Config.NodeName.
func (c *Cluster) LocalName() string { return c.name }

// GossipAddr returns the "ip:port" this node advertises to the others:
// the real port when BindAddr's port was 0, and the address memberlist
// chose when bound to all interfaces without an AdvertiseAddr.
func (c *Cluster) GossipAddr() string { return c.gossip }

// UpdateMeta changes the metadata this node advertises and waits until the
// change is broadcast or timeout passes (0 waits as long as it takes, when
// there are other members). An invalid meta is a *ConfigError for
// "Meta" or "Meta.GRPCAddr", and changes nothing. A timeout is
// ErrMetaNotConfirmed, after which the change is made and still gossiped.
func (c *Cluster) UpdateMeta(meta NodeMeta, timeout time.Duration) error {
	if err := errors.Join(meta.validate()...); err != nil {
		return err
	}
	b, err := meta.encode(false)
	if err != nil { // checked by validate
		return &ConfigError{Field: "Meta", Reason: err.Error()}
	}

	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	if c.shut {
		return ErrShutdown
	}
	if c.left.Load() {
		return errors.New("cluster: UpdateMeta after Leave")
	}
	c.setMeta(meta, b)
	if err := c.ml.UpdateNode(timeout); err != nil {
		// memberlist's only error here is its wait's timeout: the
		// broadcast stays queued.
		return fmt.Errorf("%w: %v", ErrMetaNotConfirmed, err)
	}
	return nil
}

// setMeta sets the metadata memberlist will send: meta, encoded as b.
func (c *Cluster) setMeta(meta NodeMeta, b []byte) {
	c.metaMu.Lock()
	c.metaVal, c.meta = meta, b
	c.metaMu.Unlock()
}

// Leave tells the other members that this node is leaving and waits, at
// most timeout in all (0: as long as it takes), until the news is
// broadcast. The others then drop this node at once and record it as Left;
// this node drops itself from its own snapshots, so that a ring built from
// Snapshot names the new owners of its keys. Joining stops. memberlist
// keeps running (keep gossiping the leave while handing keys off), so call
// Shutdown afterwards; see the package documentation for the order.
//
// Leave is idempotent. A timeout is returned as an error after which the
// node has still left locally; the others may learn it through failure
// detection instead.
func (c *Cluster) Leave(timeout time.Duration) error {
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	if c.shut {
		return ErrShutdown
	}
	if c.left.Swap(true) {
		return nil
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	remaining := func() time.Duration {
		if deadline.IsZero() {
			return 0
		}
		return max(time.Until(deadline), time.Millisecond)
	}

	// First gossip the leaving flag, so that the others record Left rather
	// than Dead even if memberlist's leave message reaches them late.
	c.metaMu.Lock()
	meta := c.metaVal
	c.metaMu.Unlock()
	if b, err := meta.encode(true); err == nil { // checked by validate
		c.setMeta(meta, b)
		if err := c.ml.UpdateNode(remaining()); err != nil {
			c.log.Debug("cluster: leaving flag not confirmed broadcast", "err", err)
		}
	}
	err := c.ml.Leave(remaining())
	c.signal()
	if err != nil {
		return fmt.Errorf("cluster: leave: %w", err)
	}
	c.log.Info("cluster: left")
	return nil
}

// Shutdown stops memberlist: it closes the gossip port, tells memberlist's
// goroutines to exit (they do within moments) and makes Run return.
// Without a Leave before it, the others see a crash: they drop this node
// once their failure detector declares it dead. Shutdown is idempotent; it
// waits for a Leave or UpdateMeta in progress.
func (c *Cluster) Shutdown() error {
	c.lifecycle.Lock()
	defer c.lifecycle.Unlock()
	if c.shut {
		return nil
	}
	c.shut = true
	close(c.done)
	if err := c.ml.Shutdown(); err != nil {
		return fmt.Errorf("cluster: shutdown memberlist: %w", err)
	}
	return nil
}

// isDone reports whether Shutdown was called.
func (c *Cluster) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
