// Package api owns Sluice's public network APIs, the ones services call:
// the sluice.v1 RateLimiter gRPC service (Check, CheckStream, Acquire,
// Release, Grant) with grpc.health.v1 and reflection, the sluice.v1
// Membership service, the Envoy rate limit service
// (envoy.service.ratelimit.v3, rls.go, over package rls's configuration),
// the HTTP/JSON API (/v1/check, /v1/usage, health endpoints, /metrics)
// with its RateLimit, RateLimit-Policy and Retry-After headers, the status
// page (/ui, ui.go: members, rates, hot keys from internal/activity), and
// the public API's latency metrics. It translates wire formats to limiter requests and limiter errors to status codes that
// name the offending field; it makes no decisions itself. The node-to-node
// service is package transport's; the two share internal/wire and never
// import each other.
package api
