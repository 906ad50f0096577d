// Command benchcompare runs the same load scenarios against a 3-node Sluice
// cluster, Redis with a Lua token bucket, and a bare gRPC echo, all on
// loopback and in one run, and writes the figures into docs/benchmarks.md
// (between the bench-compare markers), bin/bench-compare.json,
// bin/bench-compare-headline.md and a latency plot. Its RLS scenarios (f,
// g; --only rls) run Envoy RLS v3 ShouldRateLimit calls against the Sluice
// cluster (--rls-config), a 1-node Sluice, and envoyproxy/ratelimit + Redis (bin/ratelimit,
// built by make rlsref from the nested module tools/rlsref/reference), into their own
// section of docs/benchmarks.md (the bench-compare-rls markers) and plot.
//
//	make bench-compare
//	make bench-compare BENCH_FLAGS='--quick --keys-e 200000'
//
// It is also its own echo server: `benchcompare echo-server --addr A`.
//
// It owns the comparison, not the load engine (internal/bench): the command
// line (main.go); the scenarios and their limit (scenarios.go); the runner
// that starts each system's servers and runs the load scenarios a-d and the
// memory scenario e on them (runner.go, systems.go, load.go, memory.go), and
// envoyproxy/ratelimit with the RLS targets (rls.go); the
// child processes it starts and reads CPU and memory from (procs.go); the
// Redis + Lua and gRPC echo targets (redis.go, echo.go); and the report: its
// figures (report.go), the targets judged (targets.go), the lines printed as
// runs finish (console.go), the markdown sections and README headline
// (markdown.go, rls_markdown.go, tables.go) and their formatting
// (format.go), the splice between the
// markers (markers.go), the latency plot (plot.go) and the files written
// (output.go).
package main
