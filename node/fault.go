package node

// Fault is a failure that a test injects into a running node, to see how
// the rest of the cluster copes. Production code never calls Inject.
type Fault int

const (
	// FaultGRPCDown closes the node's gRPC ports (public and peer)
	// while it stays a live gossip member: its peers see connect errors.
	FaultGRPCDown Fault = iota + 1
	// FaultCrash stops the node at once, as a kill -9 would: no leave, no
	// handoff, no drain, nothing more written to its data directory. Its peers see connect errors, then memberlist
	// declares it dead. Run returns nil once its context is cancelled.
	FaultCrash
	// FaultGossipMute drops the gossip packets (UDP) the node sends, while
	// memberlist's TCP streams and the gRPC ports keep working: it answers
	// no probe, so the others report it Suspect, but memberlist
	// keeps it a member (its TCP fallback probes pass).
	// FaultGossipUnmute ends it.
	FaultGossipMute
	// FaultGossipUnmute ends FaultGossipMute: the node answers probes
	// again and the others report it Alive.
	FaultGossipUnmute
	// FaultRaftCut drops every message of the group of the ring's epochs
	// that the node sends or receives, while gossip and its gRPC ports
	// keep working: it is cut off from the group's majority (its owner
	// lease runs out) though its peers still reach it. FaultRaftHeal
	// ends it.
	FaultRaftCut
	// FaultRaftHeal ends FaultRaftCut.
	FaultRaftHeal
)

// Inject applies a fault to a running node.
func (n *Node) Inject(f Fault) {
	switch f {
	case FaultGRPCDown:
		n.grpc.Server.Stop()
		n.peerGRPC.Stop()
	case FaultCrash:
		n.crashed.Store(true)
		if n.disk.w != nil {
			n.disk.w.Abandon() // a kill -9 writes nothing more
		}
		n.grpc.Server.Stop()
		n.peerGRPC.Stop()
		_ = n.http.Close()
		_ = n.cluster.Shutdown()
		n.epochs.stop(true) // Run is running: Inject is for running nodes
	case FaultGossipMute, FaultGossipUnmute:
		n.cluster.MuteGossip(f == FaultGossipMute)
	case FaultRaftCut, FaultRaftHeal:
		n.raftCut.Store(f == FaultRaftCut)
	}
}
