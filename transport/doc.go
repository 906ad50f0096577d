// Package transport carries checks to their owners: it is the limiter's
// Peers over gRPC (sluice.v1.Peer). PeerClient implements limiter.Peers:
// a connection per peer, concurrent Check calls coalesced onto one
// Peer.CheckStream per peer (unary calls for peers that predate it),
// Acquire, Release, Fetch and Handoff RPCs, and a circuit breaker per peer.
// Server serves sluice.v1.Peer for the limiter of its node, validating
// every request; it has a registration of its own, apart from the public
// API (package api), so that it can be fenced from callers that are not
// peers. The two share internal/wire and never import each other.
//
// The same service carries the messages of a Raft group (Peer.Raft), as
// opaque bytes bounded by MaxRaftMessageBytes and MaxRaftBatch: RaftSender
// sends them, on one stream per peer over PeerClient's connection (so the
// peer TLS, mTLS or cluster secret applies unchanged), from a bounded queue
// and a goroutine per peer, never blocking its caller and dropping (and
// counting) what does not fit or cannot be sent; Server hands what it
// receives to its RaftReceiver, in order per sender.
package transport
