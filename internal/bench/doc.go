// Package bench drives load at a rate limiter and measures it: closed or
// open loop (latency from the intended send time, so coordinated omission
// does not hide delays), an HDR histogram of latency, a live progress line,
// and an audit of each key's admitted checks against its limit's bound.
// It is the engine of `sluice bench` and of `make bench-compare`.
//
// It owns a run's settings (config.go); the engine that starts the workers,
// makes each call and merges what they measured into a Summary (bench.go);
// the worker loop, closed or open, and its pacing (loop.go); the per-call
// deadline context (callctx.go); the latency histograms (histogram.go); the
// audit against each key's bound (audit.go); the progress line
// (progress.go); the Summary and its JSON and text forms (summary.go); the
// Target interface (target.go), the Target for Sluice's Go client
// (sluice.go) and the Target that calls Envoy's rate limit service, RLS v3
// ShouldRateLimit, on Sluice or envoyproxy/ratelimit (rls.go). The Redis +
// Lua and gRPC echo targets belong to cmd/benchcompare.
package bench
