// Package limitertest runs several real limiters in one process, for tests
// of what the limiter does across nodes: routing to owners, handoff,
// grants and fallback. It owns three things:
//
//   - Network, an in-memory implementation of limiter.Peers that delivers
//     each call straight to the target limiter's server-side methods (the
//     ones the gRPC peer server calls) and can drop, delay and cut calls
//     per link, isolate a node, and heal, in the style of etcd-io/raft's
//     test network;
//   - Clock, a fake clock shared by the limiters (limiter.Config.Clock);
//   - Cluster, which builds limiters with limiter.New, each with its own
//     store, and drives membership one step at a time (ring changes,
//     handoffs, graceful leaves) as package node does, so that a test reads
//     as a scenario and fixes the order in which nodes see each change;
//     NewEpochCluster makes those rings the epochs of one log, with each
//     node's applied epoch on its peer calls and a receiver behind caught
//     up as the ring's Raft log would.
//
// Nothing here is a fake of the limiter or the store: only time and the
// network's faults are simulated. It opens no sockets and starts no
// goroutines of its own.
package limitertest
