package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/api"
	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/activity"
	"github.com/sluice-rl/sluice/internal/version"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/rls/xds"
	"github.com/sluice-rl/sluice/transport"
)

// Node is one Sluice server. Build it with New, start it with Run.
type Node struct {
	cfg      Config
	log      *slog.Logger
	limiter  *limiter.Limiter
	cluster  *cluster.Cluster
	peers    *transport.PeerClient
	ringEp   ringEpoch // the installed ring's epoch (ringepoch.go)
	pm       *transport.PeerMetrics
	grpc     *api.GRPC
	rls      *api.RLS
	rlsLoad  *rls.Reloader // nil without Config.RLSConfig
	rlsXDS   *xds.Client   // nil without Config.RLSXDS
	rlsHash  atomic.Pointer[string]
	peerSrv  *transport.Server
	peerGRPC *grpc.Server // serves peerSrv alone, on peerLn
	http     *http.Server
	grpcLn   net.Listener
	httpLn   net.Listener
	peerLn   net.Listener
	grpcAdv  string
	peerAdv  string
	sec      security
	caps     *limits       // limits.go
	auth     authMode      // how the cluster is authenticated (clusterauth.go)
	handoff  chan struct{} // buffer 1: the ring changed, hand off
	serving  atomic.Bool
	stopping atomic.Bool
	crashed  atomic.Bool // FaultCrash was injected
	raftCut  atomic.Bool // FaultRaftCut is in force
	disk     disk        // Config.DataDir (persist.go)
	replMu   sync.Mutex  // serializes limiter.Replicate (replicateLoop, flushDisk)
	ran      atomic.Bool

	// The policies (policies.go); policyLoad is nil without Config.PolicyFile.
	policyLoad    *policy.Reloader
	policyHash    atomic.Pointer[string]
	policyReloads *prometheus.CounterVec
	metaKick      chan struct{} // buffer 1: gossip the metadata again

	// The last loads of the policy file and the RLS config, for /ui
	// (configstate.go).
	policyState, rlsState configState

	activity    *activity.Recorder // the status page's rates and hot keys (ui.go)
	ringMu      sync.Mutex         // serializes the ring's rebuilds from gossip and from epochs (epochs.go)
	builtFrom   []cluster.Member   // the members (states aside) of the last ring onMembership built (suspect.go)
	epochs      *epochs            // the node's member of the Raft group of the ring's epochs (epochs.go)
	ringChanges prometheus.Counter // sluice_ring_changes_total (metrics.go)
}

// New builds a node: it binds the gRPC, HTTP, peer and gossip listeners, so that
// their addresses are known (for ":0") before Run is called, but joins no
// one. A node that is never Run must be closed with Close.
func New(cfg Config) (n *Node, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg, auth, err := cfg.clusterAuth()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := prometheus.NewRegistry()
	if log, err = cappedLogger(log, reg); err != nil { // every component logs through it
		return nil, err
	}
	log = log.With("node", cfg.NodeName)
	sec, err := loadTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	cfg.Bounds = cfg.Bounds.withDefaults()
	n = &Node{cfg: cfg, log: log, handoff: make(chan struct{}, 1), sec: sec, auth: auth}
	built := n                // the error returns below set n to nil
	n.setRLSHash(rls.Empty()) // until newRLS loads a configuration
	defer func() {
		if err != nil {
			built.closeAll()
		}
	}()
	if n.sec.secret, err = n.loadSecret(); err != nil {
		return nil, err
	}
	set, err := n.newPolicies()
	if err != nil {
		return nil, err
	}
	if n.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("node: grpc listen %s: %w", cfg.GRPCAddr, err)
	}
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("node: http listen %s: %w", cfg.HTTPAddr, err)
	}
	if n.peerLn, err = net.Listen("tcp", cfg.PeerAddr); err != nil {
		return nil, fmt.Errorf("node: PeerAddr: listen %s: %w", cfg.PeerAddr, err)
	}
	if n.caps, err = newLimits(cfg.Bounds, reg, log); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.grpcLn, n.peerLn, n.httpLn = n.caps.listeners(n.grpcLn, n.peerLn, n.httpLn)

	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pm, err := transport.NewPeerMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.pm = pm
	if n.peers, err = transport.NewPeerClient(transport.PeerClientConfig{
		Self:           cfg.NodeName,
		Timeout:        cfg.PeerTimeout,
		BatchWindow:    cfg.BatchWindow,
		Metrics:        pm,
		DialOptions:    n.sec.peerDialOptions(),
		TracerProvider: cfg.TracerProvider,
		Clock:          cfg.peerBreakerClock,
		Epoch:          func() uint64 { return n.limiter.Epoch() }, // 0 once leaving; the limiter exists before any call
	}); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.activity = activity.New(activity.Config{})
	if err = n.openDisk(); err != nil {
		return nil, err
	}
	if n.limiter, err = limiter.New(limiter.Config{
		NodeName: cfg.NodeName,
		Clock:    cfg.Clock,
		Store:    cfg.Store,
		Ring:     cfg.Ring,
		Peers:    n.peers,
		// A fetch from a previous owner happens inside a forwarded check:
		// it must give up well before the forwarder's own peer deadline.
		FetchTimeout: max(cfg.PeerTimeout/4, 10*time.Millisecond),
		MaxLeaseTTL:  cfg.MaxLeaseTTL,
		// Peer calls come over the cluster secret's or peer mTLS's TLS.
		PeersAuthenticated: auth == authSecret || auth == authPeerTLS,
		Grants:             cfg.Grants,
		Replicas:           limiterReplicas(cfg.Replicas),
		Policies:           set,
		Registerer:         reg,
		Logger:             log,
		Activity:           n.activity,
		OnChanged:          n.onChanged(),
		OwnerLease:         n.ownerLease,
		Epoch:              n.ringEp.load,
		WaitEpoch:          n.ringEp.wait,
		// A receiver's catch-up happens inside a forwarded call: half the
		// forwarder's peer deadline at most, the rest for the decision.
		CatchUpWait: min(limiter.DefaultCatchUpWait, cfg.PeerTimeout/2),
	}); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err = n.loadDisk(); err != nil {
		return nil, err
	}

	if n.ringChanges, err = n.registerNodeMetrics(reg); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	ccfg := cluster.LANConfig(cfg.NodeName)
	if cfg.ClusterPreset == cluster.PresetLocal {
		ccfg = cluster.LocalConfig(cfg.NodeName)
	}
	ccfg.BindAddr = cfg.GossipAddr
	ccfg.AdvertiseAddr = cfg.GossipAdvertiseAddr
	ccfg.Join = cfg.Join
	ccfg.GossipKeyFile, ccfg.Alone = cfg.GossipKeyFile, auth == authAlone
	if n.sec.secret != nil {
		ccfg.GossipKeys = n.sec.secret.Current().GossipKeys
	}
	ccfg.Meta = cluster.NodeMeta{Version: version.String(), PolicyHash: n.PolicyHash(), RLSHash: n.RLSHash(), Protocol: transport.PeerProtocol}
	ccfg.OnChange = n.onMembership
	ccfg.Logger = log
	if n.cluster, err = cluster.New(ccfg); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err = errors.Join(registerGossipKeyMetrics(reg, n.cluster), n.registerClusterAuthMetrics(reg)); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err = n.registerPolicyMetrics(reg); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n.grpcAdv, err = advertise(cfg.GRPCAdvertiseAddr, n.grpcLn.Addr().String(), n.cluster.GossipAddr()); err != nil {
		return nil, fmt.Errorf("node: GRPCAdvertiseAddr: %w", err)
	}
	if n.peerAdv, err = advertise(cfg.PeerAdvertiseAddr, n.peerLn.Addr().String(), n.cluster.GossipAddr()); err != nil {
		return nil, fmt.Errorf("node: PeerAdvertiseAddr: %w", err)
	}
	if err = n.newEpochs(reg); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	// A broadcast not confirmed within the second is still gossiped: a
	// loaded cluster is no reason to refuse to start.
	if err = n.cluster.UpdateMeta(n.meta(), time.Second); errors.Is(err, cluster.ErrMetaNotConfirmed) {
		n.log.Warn("metadata not yet confirmed gossiped; it still is", "err", err)
	} else if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if err = n.limiter.SetMembers([]ring.Member{{Name: cfg.NodeName, GRPCAddr: n.peerAdv}}); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}

	tm, err := api.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	// Every gRPC server of the node recovers panics with rec.
	rec := tm.Recovery(n.log)
	opts := append(n.sec.publicGRPCOptions(), cfg.Bounds.grpcOptions()...)
	opts = append(opts, n.caps.public.ServerOptions()...)
	opts = append(opts, cfg.tracingServerOptions()...)
	if n.grpc, err = api.NewGRPC(api.GRPCConfig{Service: n.limiter, Metrics: tm, Recovery: rec, ServerOptions: opts, Limits: n.caps.public}); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	api.RegisterMembership(n.grpc.Server, cfg.NodeName, n.members, n.topology, n.membershipOptions()...)
	admin, err := n.newAdmin(reg)
	if err != nil {
		return nil, err
	}
	admin.Register(n.grpc.Server)
	if err = n.newRLS(reg, tm); err != nil {
		return nil, err
	}
	if err = n.newPeerServer(pm, rec); err != nil {
		return nil, err
	}
	handler, err := api.NewHTTPHandler(api.HTTPConfig{
		Checker:      n.limiter,
		Gatherer:     reg,
		Metrics:      tm,
		Ready:        n.Ready,
		Logger:       log,
		MaxBodyBytes: cfg.Bounds.HTTPMaxBodyBytes,
		// With mTLS, the handshake lets clients without a certificate
		// in (httpTLSConfig) for the probes alone.
		RequireClientCert: n.sec.clientAuth,
		UI:                n.uiConfig(),
		RLS:               n.rls,
		Admin:             admin,
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.http = cfg.Bounds.httpServer(n.caps.shedHTTP(handler), log)
	n.http.TLSConfig = n.sec.httpTLSConfig()
	return n, nil
}

// onMembership feeds the group of the ring's epochs its view, hands the
// suspects to the limiter and, until the node routes by the applied
// epochs (epochs.go), rebuilds the ring from a membership snapshot and
// asks for a handoff; a snapshot that changed only members' states keeps
// the ring (suspect.go). It runs on the cluster's goroutine.
func (n *Node) onMembership(s cluster.Snapshot) {
	n.noteSnapshot(s)
	if n.stopping.Load() {
		return // shutdown installs its own ring
	}
	n.limiter.SetSuspects(suspectsOf(s))
	n.ringMu.Lock()
	defer n.ringMu.Unlock()
	if n.epochs.routing || n.onlyStatesChanged(s) {
		return // the ring comes from the applied epochs (epochs.go)
	}
	if n.setRing(ringMembers(s)) {
		n.builtFrom = stateless(s)
	}
}

// setRing rebuilds the limiter's ring from members and asks for a
// handoff; it reports whether the ring changed. Called with ringMu held.
func (n *Node) setRing(members []ring.Member) bool {
	n.forgetNewcomers(members)
	n.peers.Connect(members)
	if err := n.limiter.SetMembers(members); err != nil {
		n.log.Error("ring rebuild failed; keeping the old ring", "err", err)
		return false
	}
	n.ringChanges.Inc()
	n.peers.Forget(func(name string) bool {
		_, ok := n.limiter.Ring().Member(name)
		return ok
	})
	select {
	case n.handoff <- struct{}{}:
	default:
	}
	return true
}

// members lists the members for the Membership API.
func (n *Node) members() []api.MemberInfo {
	s := n.cluster.Snapshot()
	r := n.limiter.Ring()
	var shares map[string]float64
	if r != nil {
		shares = r.Shares()
	}
	st := n.epochs.node.Status()
	out := make([]api.MemberInfo, 0, len(s.Members))
	for _, m := range s.Members {
		out = append(out, api.MemberInfo{Name: m.Name, GossipAddr: m.GossipAddr, GRPCAddr: m.GRPCAddr,
			State: n.memberState(m).String(), Version: m.Version, PolicyHash: m.PolicyHash, RLSHash: m.RLSHash, RingShare: shares[m.Name],
			RaftRole: epochRole(st, m.Name), RaftGroup: m.Raft.Group, Epoch: m.Raft.Epoch})
	}
	return out
}

// topology tells clients how to compute owners (the Membership API).
func (n *Node) topology() api.Topology {
	set := n.limiter.Policies()
	pols := make(map[string]bucket.Algorithm, set.Len())
	for _, name := range set.Names() {
		if p, ok := set.Lookup(name); ok {
			pols[name] = p.Limit.Algorithm
		}
	}
	return api.Topology{Ring: n.cfg.Ring.WithDefaults(), Policies: pols}
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.NodeName }

// GRPCAddr returns the bound gRPC address.
func (n *Node) GRPCAddr() string { return n.grpcLn.Addr().String() }

// HTTPAddr returns the bound HTTP address.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// GossipAddr returns the advertised gossip address.
func (n *Node) GossipAddr() string { return n.cluster.GossipAddr() }

// Limiter returns the node's limiter.
func (n *Node) Limiter() *limiter.Limiter { return n.limiter }

// PeerStats counts this node's forwarded checks and peer RPCs.
func (n *Node) PeerStats() transport.PeerStats { return n.pm.Snapshot() }

// Members returns the members this node sees.
func (n *Node) Members() []api.MemberInfo { return n.members() }

// Ready reports whether the node serves, has joined its cluster, routes
// by the agreed ring (an applied epoch lists it), and is not shutting
// down.
func (n *Node) Ready() bool {
	return n.serving.Load() && !n.stopping.Load() && n.cluster.Joined() && n.epochs.routed.Load()
}

// Close releases the listeners of a node that was never Run.
func (n *Node) Close() error {
	if n.ran.Load() {
		return nil
	}
	return n.closeAll()
}

func (n *Node) closeAll() error {
	var errs []error
	if n.grpc != nil {
		n.grpc.Server.Stop() // its stream workers start with it
	}
	if n.peerGRPC != nil {
		n.peerGRPC.Stop() // so do the peer server's
	}
	if n.grpcLn != nil {
		errs = append(errs, n.grpcLn.Close())
	}
	if n.httpLn != nil {
		errs = append(errs, n.httpLn.Close())
	}
	if n.peerLn != nil {
		errs = append(errs, n.peerLn.Close())
	}
	if n.cluster != nil {
		errs = append(errs, n.cluster.Shutdown())
	}
	if n.limiter != nil {
		n.limiter.Close()
	}
	if n.epochs != nil {
		n.epochs.stop(false)
	}
	if n.peers != nil {
		errs = append(errs, n.peers.Close())
	}
	errs = append(errs, n.closeDisk())
	n.shutdownTracing()
	n.caps.close()
	return errors.Join(errs...)
}

// Reload re-reads the policy file, the RLS configuration, the gossip key
// file and the cluster secret file (SIGHUP). A bad file keeps what is in force and returns why.
func (n *Node) Reload() error {
	var errs []error
	if err := n.cluster.ReloadGossipKeys(); err != nil {
		errs = append(errs, fmt.Errorf("node: reload: %w", err))
	}
	if n.sec.secret != nil {
		if err := n.sec.secret.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("node: reload: %w", err))
		}
	}
	if n.rlsLoad != nil {
		if err := n.rlsLoad.Reload(); err != nil {
			errs = append(errs, fmt.Errorf("node: reload: %w", err))
		}
	}
	if n.policyLoad != nil {
		if err := n.policyLoad.Reload(); err != nil { // logged by the Reloader
			errs = append(errs, fmt.Errorf("node: reload: %w", err))
		}
	}
	return errors.Join(errs...)
}

// RLS returns the node's Envoy rate limit service.
func (n *Node) RLS() *api.RLS { return n.rls }
