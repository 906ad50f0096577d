package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/epoch"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/transport"
)

// The ring's epochs (package epoch, docs/cluster.md "The ring's epochs"):
// every node runs a member of the Raft group that orders the ring's
// changes. Its messages go over the peer port (Peer/Raft: RaftSender out,
// the peer server's RaftReceiver in), under the peer mTLS or cluster
// secret when configured; its view of the cluster is gossip's (feedView),
// each member's Raft advert carried in its gossip metadata
// (cluster.NodeMeta.Raft). Node.Run owns the group's loop; shutdown stops
// it once the group went on without the node.
//
// The limiter's ring is the ring of the last applied epoch (ringLoop), so
// every node routes by the same agreed ring, once an applied epoch lists
// this node; until then (a node joining, which applies the group's epochs
// from the first, before its own join) it is built from gossip's
// snapshots, as before epochs, and the node is not ready. A leaving node
// installs its own ring (shutdown). The installed ring's epoch
// (ringepoch.go) is the one the node's peer calls carry and judge the
// calls it serves by (docs/cluster.md "Epochs on peer calls").

// epochs is the node's member of the group.
type epochs struct {
	node   *epoch.Node
	sender *transport.RaftSender
	cfg    epoch.Config

	viewMu   sync.Mutex                       // serializes feedView: the last view set is built from the latest state
	lastSnap atomic.Pointer[cluster.Snapshot] // the last snapshot the cluster delivered

	ctx      context.Context // run's; cancelled by stop
	cancel   context.CancelFunc
	done     chan struct{} // closed when run returns
	stopOnce sync.Once

	latest  atomic.Pointer[epoch.Epoch] // the last epoch applied, for ringLoop
	kick    chan struct{}               // buffer 1: latest changed
	routing bool                        // the ring comes from epochs; guarded by Node.ringMu
	routed  atomic.Bool                 // routing, for Ready
}

// localEpochTick is the group's tick under the local preset, and
// localLease its lease: 2.6 election timeouts, LANConfig's proportion, so
// that a lease outlasts an election and a leader's heartbeats late on a
// loaded machine (DeadWait 990ms).
const (
	localEpochTick = 25 * time.Millisecond
	localLease     = 650 * time.Millisecond
)

// bootstrapExpect is Config.BootstrapExpect, or its default: 1 without a
// join list (a group of one at once), else the number of distinct seeds,
// at least 2 (the usual list names every node, this one included; a node
// with a join list never founds a group alone, so a restarted node waits
// to be added to the group that exists).
func (c Config) bootstrapExpect() int {
	if c.BootstrapExpect > 0 {
		return c.BootstrapExpect
	}
	if len(c.Join) == 0 {
		return 1
	}
	seeds := slices.Clone(c.Join)
	slices.Sort(seeds)
	return max(2, len(slices.Compact(seeds)))
}

// newEpochs builds the node's member of the group, with its transport;
// it starts nothing (run does). The node's peer address is its address in
// the group.
func (n *Node) newEpochs(reg prometheus.Registerer) error {
	cfg := epoch.LANConfig(n.cfg.NodeName, n.peerAdv)
	if n.cfg.ClusterPreset == cluster.PresetLocal {
		// Tests and one-host clusters: FastConfig's timings at a 25ms
		// tick (election timeout 250ms), not 10ms: several nodes in one
		// process, under the race detector, beside others' load.
		cfg = epoch.FastConfig(n.cfg.NodeName, n.peerAdv)
		cfg.TickInterval, cfg.LeaseDuration = localEpochTick, localLease
	}
	cfg.BootstrapExpect = n.cfg.bootstrapExpect()
	sender, err := transport.NewRaftSender(transport.RaftSenderConfig{Peers: n.peers})
	if err != nil {
		return err
	}
	e := &epochs{sender: sender, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	cfg.Transport = raftTransport{s: sender, cut: &n.raftCut}
	cfg.OnEpoch = n.onEpoch
	if e.node, err = epoch.New(cfg); err != nil {
		e.cancel()
		sender.Close()
		return err
	}
	e.cfg = cfg
	n.epochs = e
	return e.register(reg)
}

// register registers the group's metrics on reg, read at each scrape.
func (e *epochs) register(reg prometheus.Registerer) error {
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, g := range []struct {
		name, help string
		f          func() float64
	}{
		{"sluice_epoch_applied", "Number of the last epoch of the ring this node applied; 0 while it is in no group.",
			func() float64 { return float64(e.node.Advert().Epoch) }},
		{"sluice_epoch_leader", "1 while this node leads the Raft group of the ring's epochs, else 0.",
			func() float64 { return bit(e.node.Status().Leader) }},
		{"sluice_epoch_lease_valid", "1 while this node holds an owner lease renewed through a majority of the group's voters, else 0.",
			func() float64 { return bit(e.node.LeaseUntil().After(time.Now())) }},
		{"sluice_epoch_voters", "Voters of the Raft group of the ring's epochs, as this node knows them.",
			func() float64 { return float64(len(e.node.Status().Voters)) }},
		{"sluice_epoch_learners", "Learners of the Raft group of the ring's epochs, as this node knows them.",
			func() float64 { return float64(len(e.node.Status().Learners)) }},
	} {
		if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, g.f)); err != nil {
			return err
		}
	}
	return nil
}

// run drives the group until stop; it runs in Node.Run's group but on a
// context of its own, since a leaving node keeps it past the others.
func (e *epochs) run() error {
	defer close(e.done)
	return e.node.Run(e.ctx)
}

// stop ends run and, if ran (Node.Run started run), waits for it; then it
// closes the sender (before the peer client it sends on).
func (e *epochs) stop(ran bool) {
	e.stopOnce.Do(func() {
		e.cancel()
		if ran {
			<-e.done
		}
		e.sender.Close()
	})
}

// raftTransport is the group's epoch.Transport: each message in the
// message format (epoch.MarshalMessage), queued on the RaftSender per
// receiver, in order; none while cut (FaultRaftCut).
type raftTransport struct {
	s   *transport.RaftSender
	cut *atomic.Bool
}

func (t raftTransport) Send(msgs []epoch.Message) {
	if t.cut.Load() {
		return
	}
	for i := 0; i < len(msgs); {
		to := msgs[i].To
		var out [][]byte
		for ; i < len(msgs) && msgs[i].To == to; i++ {
			if b, err := epoch.MarshalMessage(msgs[i]); err == nil {
				out = append(out, b)
			}
		}
		t.s.Send(to.Name, to.GRPCAddr, out)
	}
}

// raftReceiver is the peer server's transport.RaftReceiver: it hands each
// message to the group's inbox (which drops when full; Raft retransmits).
type raftReceiver struct{ n *Node }

func (r raftReceiver) StepRaft(_ context.Context, _ string, b []byte) error {
	msg, err := epoch.UnmarshalMessage(b)
	if err != nil {
		return fmt.Errorf("%w: %w", transport.ErrRaftMessage, err)
	}
	if r.n.raftCut.Load() {
		return nil // FaultRaftCut: lost, as on a cut network
	}
	r.n.epochs.node.Step(msg)
	return nil
}

// onEpoch is the group's OnEpoch: it logs the epoch, gossips the node's
// new advert, stops the sender of a member that went away and gives the
// group a view that knows how the members it no longer lists went.
func (n *Node) onEpoch(e epoch.Epoch) {
	n.log.Info("epoch applied", "epoch", e.Number, "group", fmt.Sprintf("%016x", e.Group),
		"change", e.Change.Kind.String(), "member", e.Change.Name, "members", len(e.Members), "voters", len(e.Voters))
	if e.Change.Kind != epoch.Join && e.Change.Name != n.cfg.NodeName {
		n.epochs.sender.Remove(e.Change.Name)
	}
	if e.Change.Kind == epoch.Dead && e.Change.Name != n.cfg.NodeName {
		// Before ringLoop installs the ring without it: the partitions
		// it moves here wait until its lease has surely run out, on this
		// node's monotonic clock (a timer), whatever the limiter's clock.
		time.AfterFunc(n.epochs.node.DeadWait(), n.limiter.AwaitDead(e.Change.Name))
	}
	n.kickMeta()
	n.feedView()
	n.epochs.latest.Store(&e)
	select {
	case n.epochs.kick <- struct{}{}:
	default:
	}
}

// sameRing reports whether r has exactly members (names and addresses):
// the ring in force is kept then, as a snapshot that changed no member
// keeps it (a rebuild starts a handoff round for nothing).
func sameRing(r *ring.Ring, members []ring.Member) bool {
	if r == nil || r.Len() != len(members) {
		return false
	}
	for _, m := range members {
		if have, ok := r.Member(m.Name); !ok || have != m {
			return false
		}
	}
	return true
}

// ringLoop installs the ring of the last applied epoch in the limiter
// (a burst of epochs, as a joiner applies the group's history, makes one
// ring: the group publishes its applied epoch before it delivers the
// burst, so the earlier ones are skipped), once one lists this node; not
// while the node shuts down.
func (n *Node) ringLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.epochs.kick:
		}
		e := n.epochs.latest.Load()
		if e.Number < n.epochs.node.Advert().Epoch {
			continue // within a burst (a joiner catching up): its last epoch kicks again
		}
		n.ringMu.Lock()
		if !n.stopping.Load() && (n.epochs.routing || slices.ContainsFunc(e.Members, func(m ring.Member) bool { return m.Name == n.cfg.NodeName })) {
			if sameRing(n.limiter.Ring(), e.Members) || n.setRing(slices.Clone(e.Members)) {
				n.ringEp.set(e.Number) // the calls this node sends carry it from now on
				if !n.epochs.routing {
					n.log.Info("routing by the ring's epochs", "epoch", e.Number, "group", fmt.Sprintf("%016x", e.Group))
					n.epochs.routing = true
					n.epochs.routed.Store(true)
				}
			}
		}
		n.ringMu.Unlock()
	}
}

// ownerLease is the limiter's Config.OwnerLease: the time left on the
// group's owner lease (epoch.Node.LeaseUntil, on the monotonic clock),
// once the limiter routes by the ring's epochs. A group of one holds it
// always (its majority is itself); so does a node whose ring still comes
// from gossip (starting, or joining: the epochs' lease is not about that
// ring, and it decides as before epochs).
func (n *Node) ownerLease() time.Duration {
	e := n.epochs
	if e == nil || !e.routed.Load() {
		return limiter.MaxLeaseReading
	}
	if st := e.node.Status(); len(st.Voters)+len(st.Learners) <= 1 {
		return limiter.MaxLeaseReading
	}
	return time.Until(e.node.LeaseUntil())
}

// advert is the node's Raft advert, for its gossip metadata.
func (n *Node) advert() cluster.RaftMeta {
	if n.epochs == nil {
		return cluster.RaftMeta{}
	}
	a := n.epochs.node.Advert()
	return cluster.RaftMeta{ID: a.RaftID, Group: a.Group, Epoch: a.Epoch}
}

// feedView gives the group gossip's view: the members of the last
// snapshot the cluster delivered (never one taken while a join merges a
// seed's members), with their adverts; the members of the applied ring
// that gossip no longer lists, as left or dead when the cluster still
// remembers how they went (the leader removes the others as dead); and
// this node, leaving once shutdown began.
func (n *Node) feedView() {
	e := n.epochs
	e.viewMu.Lock()
	defer e.viewMu.Unlock()
	s := e.lastSnap.Load()
	if s == nil {
		return // nothing delivered yet: no view
	}
	self := n.cfg.NodeName
	view := make([]epoch.Peer, 0, len(s.Members)+1)
	listed := make(map[string]bool, len(s.Members))
	for _, m := range s.Members {
		listed[m.Name] = true
		rm, ok := ringMember(m)
		if m.Name == self || !ok {
			continue
		}
		st := epoch.StatusAlive
		if m.State == cluster.Suspect {
			st = epoch.StatusSuspect
		}
		view = append(view, epoch.Peer{Name: m.Name, GRPCAddr: rm.GRPCAddr, RaftID: m.Raft.ID, Group: m.Raft.Group, Epoch: m.Raft.Epoch, Status: st})
	}
	for _, m := range e.node.Status().Epoch.Members {
		if listed[m.Name] || m.Name == self {
			continue
		}
		switch st, ok := n.cluster.State(m.Name); {
		case ok && st == cluster.Left:
			view = append(view, epoch.Peer{Name: m.Name, GRPCAddr: m.GRPCAddr, Status: epoch.StatusLeft})
		case ok && st == cluster.Dead:
			view = append(view, epoch.Peer{Name: m.Name, GRPCAddr: m.GRPCAddr, Status: epoch.StatusDead})
		}
	}
	a := e.node.Advert()
	me := epoch.Peer{Name: self, GRPCAddr: n.peerAdv, RaftID: a.RaftID, Group: a.Group, Epoch: a.Epoch}
	if n.stopping.Load() {
		me.Status = epoch.StatusLeft
	}
	e.node.SetView(append(view, me))
}

// noteSnapshot records a snapshot the cluster delivered and feeds the
// group its view; onMembership calls it first, shutdown or not.
func (n *Node) noteSnapshot(s cluster.Snapshot) {
	n.epochs.lastSnap.Store(&s)
	n.feedView()
}

// leaveEpochs is shutdown's part for the group, after the gossip leave
// and the linger: it tells the group this node leaves and waits (up to
// three election timeouts, or ctx) until the group has gone on without
// it: it no longer leads (a leaving leader hands its leadership to a
// caught-up voter, so that the next leader removes it), and another
// member gossips a later epoch than this node applied, the one that
// removes it. This node may never apply that epoch (a leader sends nothing
// to a member it removed), but its vote may be needed to commit it (two
// voters, or a majority of the old voters, need it).
func (n *Node) leaveEpochs(ctx context.Context) {
	n.feedView()
	e := n.epochs
	deadline := time.NewTimer(3 * e.cfg.ElectionTimeout())
	defer deadline.Stop()
	tick := time.NewTicker(e.cfg.TickInterval)
	defer tick.Stop()
	for {
		st := e.node.Status()
		if len(st.Voters)+len(st.Learners) <= 1 || !st.Leader && n.groupMovedOn(st.Epoch.Number) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			n.log.Info("the group of the ring's epochs did not go on without this node before it stopped",
				"group", fmt.Sprintf("%016x", st.Group), "epoch", st.Epoch.Number, "leader", st.Leader)
			return
		case <-tick.C:
		}
	}
}

// groupMovedOn reports whether another member gossips an epoch later
// than mine (read from the member table, which a leaving node still
// receives).
func (n *Node) groupMovedOn(mine uint64) bool {
	for _, m := range n.cluster.Snapshot().Members {
		if m.Name != n.cfg.NodeName && m.Raft.Epoch > mine {
			return true
		}
	}
	return false
}

// epochRole is member name's role in the group as this node knows it:
// leader, voter or learner; empty if it is in none.
func epochRole(st epoch.Status, name string) string {
	switch {
	case st.Lead == name && slices.Contains(st.Voters, name):
		return "leader"
	case slices.Contains(st.Voters, name):
		return "voter"
	case slices.Contains(st.Learners, name):
		return "learner"
	}
	return ""
}
