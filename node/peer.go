package node

import (
	"fmt"
	"net"

	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/transport"
)

// newPeerServer builds the peer service on a gRPC server of its own,
// served on the peer listener alone: with peer security on, it speaks mTLS
// against the peer CA and admits only peers (tlsconfig.PeerAuth).
func (n *Node) newPeerServer(pm *transport.PeerMetrics, rec *wire.Recovery) error {
	var err error
	if n.peerSrv, err = transport.NewServer(transport.ServerConfig{Service: n.limiter, Self: n.cfg.NodeName, Metrics: pm, Recovery: rec,
		Limits: n.caps.peer, Raft: raftReceiver{n}}); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	// Sluice's server options as on the public server (wire.ServerOptions:
	// the vtprotobuf codec, fixed flow-control windows, stream workers), the
	// panic recovery outermost, then the peer authentication, the peer
	// protocol check (transport.ProtocolServerOptions) and the bounds.
	opts := append(wire.ServerOptions(), rec.ServerOptions()...)
	opts = append(opts, n.sec.peerServerOptions()...)
	opts = append(opts, transport.ProtocolServerOptions()...)
	opts = append(opts, n.cfg.Bounds.grpcOptions()...)
	opts = append(opts, n.caps.peer.ServerOptions()...)
	opts = append(opts, n.cfg.tracingServerOptions()...)
	n.peerGRPC = grpc.NewServer(opts...)
	n.peerSrv.Register(n.peerGRPC)
	return nil
}

// ringMember is the ring's view of a cluster member: its peer address,
// or, for a node of a version that advertises none, its gRPC address
// (which then served the peer service). A member with neither is not
// placed on the ring.
func ringMember(m cluster.Member) (ring.Member, bool) {
	addr := m.PeerAddr
	if addr == "" {
		addr = m.GRPCAddr
	}
	return ring.Member{Name: m.Name, GRPCAddr: addr}, addr != ""
}

// PeerAddr returns the bound address of the peer service.
func (n *Node) PeerAddr() string { return n.peerLn.Addr().String() }

// serveHTTP serves HTTP on its listener, over TLS when configured.
func (n *Node) serveHTTP() error {
	if n.http.TLSConfig != nil {
		return n.http.ServeTLS(n.httpLn, "", "")
	}
	return n.http.Serve(n.httpLn)
}

// advertise picks the gRPC address to advertise: the configured one, else
// the listener's, with the gossip advertise host when the listener is
// bound to all interfaces.
func advertise(configured, listen, gossip string) (string, error) {
	if configured != "" {
		if _, _, err := net.SplitHostPort(configured); err != nil {
			return "", err
		}
		return configured, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		gh, _, err := net.SplitHostPort(gossip)
		if err != nil {
			return "", err
		}
		host = gh
	}
	return net.JoinHostPort(host, port), nil
}

// forgetNewcomers drops the connections to the members that are new to
// the ring (they joined, or came back after leaving or failing), so that
// each starts with a new connection and a closed circuit. Calls made to
// such a node while it was gone (a fetch from the likely holder of a
// pending partition, say) may have opened the circuit of the old
// connection; kept, it would fail the handoff of the node's keys back to
// it, and the checks of those keys, until its cooldown ended, while the
// node is up. The first ring has no newcomers: nothing was called before.
func (n *Node) forgetNewcomers(members []ring.Member) {
	old := n.limiter.Ring()
	if old == nil {
		return
	}
	newcomers := map[string]bool{}
	for _, m := range members {
		if _, was := old.Member(m.Name); !was {
			newcomers[m.Name] = true
		}
	}
	if len(newcomers) > 0 {
		n.peers.Forget(func(name string) bool { return !newcomers[name] })
	}
}
