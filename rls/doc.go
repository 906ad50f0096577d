// Package rls owns envoyproxy/ratelimit's configuration: its YAML format
// (one domain per file, nested descriptors of key and optional value, with
// rate_limit, shadow_mode, quota_mode, detailed_metric, value_to_metric,
// share_threshold and replaces), its validation, loading it from a file or
// a directory (a Kubernetes ConfigMap mount included), reloading it when
// the files change, and matching a request's descriptor to its rule
// exactly as the reference does, with the metric key and counter key the
// reference derives from the match.
//
// It is pure: it imports nothing of Sluice but internal/watch (the file
// watch its Reloader runs on), knows nothing of gRPC, the limiter or
// metrics. Package api serves envoy.service.ratelimit.v3 on top
// of it; package node runs its Reloader.
//
// The reference is envoyproxy/ratelimit (src/config/config_impl.go for the
// format and the matching, src/limiter/cache_key.go for the counter key,
// src/utils for the units). Where the reference's YAML library (yaml.v2)
// decides, this package decides the same: it accepts the files the
// reference accepts and rejects those it rejects, with an error that names
// the file, the line and the field.
package rls
