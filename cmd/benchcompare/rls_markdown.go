package main

import (
	"fmt"
	"strings"
)

// renderRLSSection is the markdown between the RLS markers: scenarios f
// and g, Sluice and envoyproxy/ratelimit answering Envoy's
// ShouldRateLimit.
func renderRLSSection(rep *Report, targets []Target, svgLink string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Envoy RLS v3: Sluice vs envoyproxy/ratelimit + Redis (`make bench-compare`, scenarios f and g)\n\n")
	w("Written by `make bench-compare` on %s (`--only rls` runs these alone); the command rewrites\n", rep.Date.Format("2006-01-02 15:04 MST"))
	w("everything between the `bench-compare-rls` markers, so edit `cmd/benchcompare` rather than this text.\n\n")
	writeMachine(&b, rep)
	w("Each call is one `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` with one descriptor\n")
	w("`{%s: <key>}` in domain `%s`, a key drawn uniformly from 1,000, as Envoy sends them; both systems load\n", rlsKey, rlsDomain)
	w("the same ratelimit config, a fixed window of %d per second per key:\n\n", limitN)
	w("```yaml\n%s```\n\n", orDash(rep.RLSConfig))
	w("Each run lasts %s. The systems run on loopback on this machine, one at a time, driven by the same\n", fmtSeconds(rep.DurationSec))
	w("load generator (`internal/bench`'s RLS target over %d gRPC connections, closed loop) in this command's\n", rlsConns)
	w("own process.\n\n")
	for _, sys := range rep.Systems {
		switch sys {
		case "sluice":
			procs := "Go's default GOMAXPROCS"
			if rep.NodeProcs > 0 {
				procs = fmt.Sprintf("GOMAXPROCS=%d each", rep.NodeProcs)
			}
			w("- **%s**: three `bin/sluice serve --rls-config` processes in one gossip cluster, %s; the\n", systemName(sys), procs)
			w("  calls go to the nodes in turn, and a node forwards each descriptor to its owner (no Redis).\n")
		case "sluice-owner":
			w("- **%s**: the same three nodes, called by a ring-aware caller: each call goes to the node\n", systemName(sys))
			w("  that owns its descriptor (the Go client's `Owner`, over one connection per node), which forwards\n")
			w("  nothing. Envoy cannot route so (docs/envoy.md, \"Reaching a descriptor's owner\"): this is the\n")
			w("  one-hop bound that a round-robin Envoy cluster's forwarding is measured against.\n")
		case "sluice1":
			w("- **%s**: one `bin/sluice serve --rls-config` process, Go's default GOMAXPROCS, as the\n", systemName(sys))
			w("  reference runs: it owns every descriptor and forwards none (no Redis).\n")
		case "echo":
			w("- **%s**: a bare gRPC server (Sluice's server options: codec, windows, stream workers) that\n", systemName(sys))
			w("  answers every descriptor OK, with a current limit, without deciding or counting anything: the\n")
			w("  floor of one ShouldRateLimit call on this machine.\n")
		case "ratelimit":
			w("- **%s**: `bin/ratelimit` (%s, built from the Go module proxy by\n", systemName(sys), orDash(rep.Machine.Ratelimit))
			w("  `make rlsref`; Go's default GOMAXPROCS) on one `redis-server` (no persistence), configured by\n")
			w("  environment as its docker-compose example, with `%s`.\n", refEnvText())
		}
	}
	w("\nLatency is per call. Accuracy is the key whose admitted calls came nearest to (or furthest over)\n")
	w("its bound: a fixed window admits up to %d in each window a run touches, ceil(W)+1 in W seconds, so the\n", limitN)
	w("bound is %d + %d × W. CPU s per 1M calls is the CPU time (user + system) of the system's server\n", 2*limitN, limitN)
	w("processes (for envoyproxy/ratelimit, its Redis too) plus the load generator's, per million calls.\n\n")
	for _, sc := range rep.Scenarios {
		writeScenarioTable(&b, rep, sc)
	}
	plot := ""
	if svgLink != "" {
		plot = fmt.Sprintf("Latency by percentile:\n\n![RLS latency](%s)", svgLink)
	}
	writeTail(&b, rep, targets, "target", "measured (Sluice vs envoyproxy/ratelimit + Redis)", plot)
	return b.String()
}
