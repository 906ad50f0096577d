package main

import (
	"fmt"
	"strings"
)

// renderSection is the markdown between the markers.
func renderSection(rep *Report, targets []Target, svgLink string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Sluice vs Redis + Lua vs Gubernator vs gRPC echo (`make bench-compare`)\n\n")
	w("Written by `make bench-compare` on %s; the command rewrites everything between the\n", rep.Date.Format("2006-01-02 15:04 MST"))
	w("`bench-compare` markers, so edit `cmd/benchcompare` rather than this text.\n\n")
	writeMachine(&b, rep)
	w("Every key's limit is %s. Each run of (a)–(d) lasts %s.\n", rep.Limit, fmtSeconds(rep.DurationSec))
	w("All the systems run on loopback on this machine and are loaded one at a time (the others\n")
	w("idle), by the same load generator (`internal/bench`) in the command's own process, scenario by\n")
	w("scenario.\n\n")
	for _, sys := range rep.Systems {
		switch sys {
		case "sluice":
			g := "off in every scenario"
			if rep.Grants != "" {
				g = fmt.Sprintf("on in (%s), with the client's default options (a key checked more than 10 times a second in\n  the client is answered from tokens its owner granted; the table rows say which)", rep.Grants)
			}
			procs := "Go's default GOMAXPROCS"
			if rep.NodeProcs > 0 {
				procs = fmt.Sprintf("GOMAXPROCS=%d each (three nodes share the machine's cores, as Redis runs one thread)", rep.NodeProcs)
			}
			w("- **%s**: three `bin/sluice serve` processes in one gossip cluster, %s, called through the Go\n", systemName(sys), procs)
			w("  client, which sends each check to its key's owner and coalesces concurrent checks into messages on\n")
			w("  one stream per node; the client's local token grants %s.\n", g)
		case "sluice-nogrants":
			w("- **%s**: the same cluster and client with the client's grants off, in the scenarios where\n", systemName(sys))
			w("  they are on above: every check goes to its key's owner.\n")
		case "redis":
			w("- **%s**: one `redis-server` (no persistence), the usual token bucket as a Lua script (a hash\n", systemName(sys))
			w("  per key, the client's clock), one EVALSHA per check through go-redis v9 with a pool of one\n")
			w("  connection per caller.\n")
		case "gubernator":
			w("- **%s**: three `bin/gubernator` instances (%s, Gubernator's own daemon built from the\n", systemName(sys), orDash(rep.Machine.Gubernator))
			w("  Go module proxy by `make gubref`, its defaults but for no tracing and warnings only in the log) in\n")
			w("  one memberlist cluster on 127.0.0.1, .2 and .3 (it keys peers by IP); one GetRateLimits per call\n")
			w("  to the instances in turn, as behind a load balancer, each forwarding (batched) to the key's owner;\n")
			w("  its token bucket of %d per %s, which refills the whole limit once per period.\n", limitN, fmtPeriod(limitPeriod))
		case "echo":
			w("- **%s**: a bare gRPC server that answers `sluice.v1.RateLimiter/Check` with a response of\n", systemName(sys))
			w("  the size of Sluice's without deciding anything (the floor of one gRPC call), one call per check.\n")
		}
	}
	w("\nLatency is per check, from the intended send time in the open loop (d). Accuracy is the key whose\n")
	w("admitted checks came nearest to (or furthest over) its bound, burst + limit × elapsed, and the\n")
	w("number of keys over it. CPU s per 1M checks is the CPU time (user + system) of the system's\n")
	w("server processes plus the load generator's, during the run, per million checks.\n\n")

	for _, sc := range rep.Scenarios {
		writeScenarioTable(&b, rep, sc)
	}
	writeCurve(&b, rep)
	if len(rep.Memory) > 0 {
		w("### (e) one node holding %s distinct keys\n\n", fmtInt(rep.KeysE))
		w("A fresh single node filled through its client in calls (Sluice) or pipelines of EVALSHA (Redis,\n")
		w("after FLUSHALL) of %s keys, each with a limit of %d per %s; then VmRSS from /proc. Bytes/key is the\n",
			fmtInt(memBatch), limitN, fmtPeriod(memPeriod))
		w("growth of RSS over the fill divided by the keys stored. Sluice runs with its default GC settings\n")
		w("(`--gc-percent 25` of a large heap, no memory limit outside a container) unless GOGC or GOMEMLIMIT is set.\n\n")
		w("| system | keys | fill time | RSS before | RSS after | bytes/key | Redis used_memory |\n")
		w("|---|---|---|---|---|---|---|\n")
		for _, m := range rep.Memory {
			name := memSystemName(m.System)
			if m.Error != "" && m.RSS == 0 {
				w("| %s | error: %s | | | | | |\n", name, mdEscape(m.Error))
				continue
			}
			used := ""
			if m.UsedMemory > 0 {
				used = fmtBytes(m.UsedMemory)
			}
			w("| %s | %s | %.1f s | %s | %s | %.1f | %s |\n", name, fmtInt(m.Filled), m.FillSec,
				fmtBytes(m.RSSBefore), fmtBytes(m.RSS), m.bytesPerKey(), used)
		}
		for _, m := range rep.Memory {
			if m.Error != "" && m.RSS != 0 {
				w("\n%s: %s\n", memSystemName(m.System), mdEscape(m.Error))
			}
		}
		w("\n")
	}
	plot := ""
	if svgLink != "" {
		plot = fmt.Sprintf("Latency by percentile, one tile per scenario:\n\n![latency](%s)", svgLink)
	}
	writeTail(&b, rep, targets, "target (Sluice)", "measured (Sluice vs Redis + Lua)", plot)
	return b.String()
}

// writeTail ends a section: the targets table (its columns headed
// target and measured), the latency plot's markdown (if any), and a note
// when the run was interrupted.
func writeTail(b *strings.Builder, rep *Report, targets []Target, target, measured, plot string) {
	if len(targets) > 0 {
		fmt.Fprintf(b, "### Targets\n\n| scenario | %s | %s | result |\n|---|---|---|---|\n", target, measured)
		for _, t := range targets {
			st := t.Status
			if st == statusMissed {
				st = "**missed**"
			}
			fmt.Fprintf(b, "| (%s) | %s | %s | %s |\n", t.Scenario, t.Name, mdEscape(t.Measured), st)
		}
		b.WriteString("\n")
	}
	if plot != "" {
		b.WriteString(plot + "\n\n")
	}
	if rep.Interrupted {
		b.WriteString("The run was interrupted: the figures above are partial.\n\n")
	}
}

// renderHeadline is the compact table for the README.
func renderHeadline(rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario: checks/s (allowed/s), p99, CPU |")
	for _, sys := range rep.Systems {
		name := systemName(sys)
		if sys == "sluice" && rep.Grants != "" {
			name += ", grants on in (" + rep.Grants + ")"
		}
		fmt.Fprintf(&b, " %s |", name)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(rep.Systems)))
	b.WriteString("\n")
	for _, sc := range rep.Scenarios {
		fmt.Fprintf(&b, "| (%s) %s |", sc.ID, sc.Short)
		for _, sys := range rep.Systems {
			r := rep.result(sc.ID, sys)
			if !r.ok() {
				b.WriteString(" error |")
				continue
			}
			allowed := "every one: it decides nothing"
			if sys != "echo" && r.Summary.Checks > 0 {
				allowed = fmtRate(r.Summary.ChecksPerSec*float64(r.Summary.Allowed)/float64(r.Summary.Checks)) + "/s allowed"
			}
			fmt.Fprintf(&b, " %s/s (%s), p99 %s, %.1f CPU s/1M |", fmtRate(r.Summary.ChecksPerSec), allowed, fmtMs(r.Summary.Latency.P99), r.CPUPerMillion)
		}
		b.WriteString("\n")
	}
	if m := rep.memory("sluice"); m != nil && m.Error == "" {
		fmt.Fprintf(&b, "| (e) RSS, %s keys on one node |", fmtInt(m.Filled))
		for _, sys := range rep.Systems {
			if mm := rep.memory(sys); mm != nil && mm.RSS > 0 {
				fmt.Fprintf(&b, " %s (%.0f B/key) |", fmtBytes(mm.RSS), mm.bytesPerKey())
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%s on %s, %d × %s (%s). Details: [docs/benchmarks.md](docs/benchmarks.md).\n",
		"`"+commandLine(rep)+"`", rep.Date.Format("2006-01-02"), rep.Machine.NProc, orDash(rep.Machine.CPU), rep.Machine.GoVersion)
	return b.String()
}

func commandLine(rep *Report) string {
	if rep.Flags == "" {
		return rep.Command
	}
	return rep.Command + " BENCH_FLAGS='" + rep.Flags + "'"
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// mdEscape keeps a message inside one table cell.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
