package node

// Fault is a failure that a test injects into a running node, to see how
// the rest of the cluster copes. Production code never calls Inject.
type Fault int

const (
	// FaultGRPCDown closes the node's gRPC ports (public and peer)
	// while it stays a live gossip member: its peers see connect errors.
	FaultGRPCDown Fault = iota + 1
	// FaultCrash stops the node at once, as a kill -9 would: no leave, no
	// handoff, no drain. Its peers see connect errors, then memberlist
	// declares it dead. Run returns nil once its context is cancelled.
	FaultCrash
)

// Inject applies a fault to a running node.
func (n *Node) Inject(f Fault) {
	switch f {
	case FaultGRPCDown:
		n.grpc.Server.Stop()
		n.peerGRPC.Stop()
	case FaultCrash:
		n.crashed.Store(true)
		n.grpc.Server.Stop()
		n.peerGRPC.Stop()
		_ = n.http.Close()
		_ = n.cluster.Shutdown()
	}
}
