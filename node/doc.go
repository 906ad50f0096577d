// Package node owns one Sluice server process: it builds the limiter, binds
// the public gRPC and HTTP listeners (sluice.v1 and the Envoy rate limit
// service share the gRPC one) and the peer listener (sluice.v1.Peer alone,
// which only other nodes call), with TLS/mTLS from certificate files that
// are re-read when they change (internal/tlsconfig), reloads policies and
// the RLS configuration (watching it with package rls's Reloader), sweeps
// expired state, and shuts down gracefully. `sluice serve` and the
// in-process test clusters use the same constructor, New, with ":0" ports
// in tests.
package node
