// Package xds takes envoyproxy/ratelimit's configuration over xDS, as the
// reference does with CONFIG_TYPE=GRPC_XDS_SOTW: a state-of-the-world
// aggregated discovery stream (go-control-plane's sotw ADS client) to a
// management server, for resources of the type
// "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig".
// Every response's resources are converted, as the reference's
// ConfigXdsProtoToYaml does, into the YAML model package rls loads, and
// validated by it: a valid set is applied and ACKed, an invalid one NACKed
// with the error, the configuration in force kept. A broken stream is
// opened again after an exponential backoff.
//
// Envoy Gateway runs its rate limit deployment in this mode; docs/envoy.md
// shows Sluice in its place.
package xds
