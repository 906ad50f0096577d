// Package transport owns Sluice's network APIs: the sluice.v1 gRPC service
// (with grpc.health.v1 and reflection) and the HTTP/JSON API with its
// RateLimit headers, health endpoints and /metrics. It translates wire
// formats to limiter requests and limiter errors to status codes that name
// the offending field; it makes no decisions itself.
package transport
