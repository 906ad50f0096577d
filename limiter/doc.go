// Package limiter owns the decision for a check: it validates requests,
// resolves policies, derives each key's identity hash, and applies the limit
// to the state in the node's store. It is the core that the gRPC and HTTP
// transports call; it reads the clock (an injected one in tests) and keeps
// the metrics of decisions, but it opens no sockets.
package limiter
