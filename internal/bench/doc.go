// Package bench drives load at a rate limiter and measures it: closed or
// open loop (latency from the intended send time, so coordinated omission
// does not hide delays), an HDR histogram of latency, a live progress line,
// and an audit of each key's admitted checks against its limit's bound.
// It is the engine of `sluice bench` and of `make bench-compare`.
package bench
