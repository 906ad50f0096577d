// Package node owns one Sluice server process: it builds the limiter, binds
// the gRPC and HTTP listeners, reloads policies, sweeps expired state, and
// shuts down gracefully. `sluice serve` and the in-process test clusters use
// the same constructor, New, with ":0" ports in tests.
package node
