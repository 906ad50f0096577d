// Package node owns one Sluice server process: it builds the limiter, binds
// the gRPC and HTTP listeners (sluice.v1 and the Envoy rate limit service
// share the gRPC one), reloads policies and the RLS configuration (watching
// it with package rls's Reloader), sweeps expired state, and shuts down
// gracefully. `sluice serve` and the in-process test clusters use
// the same constructor, New, with ":0" ports in tests.
package node
