package main

import (
	"fmt"
	"strings"
)

// writeMachine writes the machine table and the command line.
func writeMachine(b *strings.Builder, rep *Report) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	mc := rep.Machine
	w("| machine | |\n|---|---|\n")
	w("| CPUs | %d × %s |\n", mc.NProc, orDash(mc.CPU))
	w("| memory | %s |\n", fmtBytes(mc.MemBytes))
	w("| Go | %s %s |\n", mc.GoVersion, mc.OSArch)
	w("| load average at the start | %s |\n", orDash(mc.LoadAvg))
	w("| Redis | %s |\n", orDash(mc.Redis))
	if mc.Gubernator != "" {
		w("| Gubernator | %s |\n", mc.Gubernator)
	}
	if mc.Ratelimit != "" {
		w("| envoyproxy/ratelimit | %s |\n", mc.Ratelimit)
	}
	w("| commit | `%s` |\n\n", orDash(mc.Git))
	w("```\n%s\n```\n\n", commandLine(rep))
}

// writeScenarioTable writes one scenario's heading, table of systems and
// their errors. An RLS scenario counts calls (one descriptor each), the
// others checks.
func writeScenarioTable(b *strings.Builder, rep *Report, sc ScenarioInfo) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### (%s) %s\n\n", sc.ID, sc.Title)
	unit := "checks"
	if sc.RLS {
		unit = "calls"
	}
	open := sc.Rate > 0
	if open {
		w("| system | offered/s | %s/s | p50 | p99 | p99.9 | max | allowed / denied / errors | accuracy | CPU s per 1M %s |\n", unit, unit)
		w("|---|---|---|---|---|---|---|---|---|---|\n")
	} else {
		w("| system | %s/s | p50 | p99 | p99.9 | max | allowed / denied / errors | accuracy | CPU s per 1M %s |\n", unit, unit)
		w("|---|---|---|---|---|---|---|---|---|\n")
	}
	for _, sys := range rep.Systems {
		r := rep.result(sc.ID, sys)
		name := systemName(sys)
		if sys == "sluice" && r != nil && !sc.RLS {
			if r.Grants {
				name += ", grants on"
			} else {
				name += ", grants off"
			}
		}
		if !r.ok() {
			why := "not run"
			if r != nil {
				why = "error: " + mdEscape(r.Error)
			}
			cells := 8
			if open {
				cells = 9
			}
			w("| %s | %s |%s\n", name, why, strings.Repeat(" |", cells-1))
			continue
		}
		s := r.Summary
		w("| %s |", name)
		if open {
			w(" %s |", fmtRate(s.Offered))
		}
		acc := accuracy(s.Audit)
		if sys == "echo" {
			acc = "n/a (decides nothing)"
		}
		w(" %s | %s | %s | %s | %s | %s / %s / %s | %s | %.2f |\n", fmtRate(s.ChecksPerSec),
			fmtMs(s.Latency.P50), fmtMs(s.Latency.P99), fmtMs(s.Latency.P999), fmtMs(s.Latency.Max),
			fmtInt(s.Allowed), fmtInt(s.Denied), fmtInt(s.Errors), acc, r.CPUPerMillion)
	}
	for _, sys := range rep.Systems {
		if r := rep.result(sc.ID, sys); r.ok() && r.Error != "" {
			w("\n%s: %s\n", systemName(sys), mdEscape(r.Error))
		}
		if r := rep.result(sc.ID, sys); r.ok() && r.Summary.FirstError != "" {
			w("\n%s, first error: `%s`\n", systemName(sys), strings.ReplaceAll(r.Summary.FirstError, "`", "'"))
		}
	}
	w("\n")
}

// writeCurve writes scenario h: each system's checks/s (and p99) against
// the callers, 1,000 keys uniform, closed loop.
func writeCurve(b *strings.Builder, rep *Report) {
	if len(rep.Curve) == 0 {
		return
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### (h) throughput vs callers: 1,000 keys uniform, closed loop\n\n")
	w("checks/s (p99) at each number of callers; each point a run of its own.\n\n")
	w("| system |")
	for _, n := range rep.Curve {
		w(" %d |", n)
	}
	w("\n|---|%s\n", strings.Repeat("---|", len(rep.Curve)))
	for _, sys := range rep.Systems {
		name := systemName(sys)
		any := false
		var cells strings.Builder
		for _, n := range rep.Curve {
			r := rep.result(fmt.Sprintf("h%d", n), sys)
			switch {
			case r == nil:
				cells.WriteString(" |")
			case !r.ok():
				any = true
				cells.WriteString(" error |")
			default:
				any = true
				if sys == "sluice" {
					if r.Grants {
						name = systemName(sys) + ", grants on"
					} else {
						name = systemName(sys) + ", grants off"
					}
				}
				fmt.Fprintf(&cells, " %s (%s) |", fmtRate(r.Summary.ChecksPerSec), fmtMs(r.Summary.Latency.P99))
			}
		}
		if any {
			w("| %s |%s\n", name, cells.String())
		}
	}
	w("\n")
}
