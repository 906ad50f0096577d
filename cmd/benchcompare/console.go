package main

import "fmt"

// resultLine is the one-line summary printed when a run finishes.
func resultLine(r Result) string {
	head := fmt.Sprintf("(%s) %-16s", r.Scenario, systemName(r.System))
	if !r.ok() {
		return head + "  error: " + r.Error
	}
	s := r.Summary
	line := fmt.Sprintf("%s %10s checks/s  p50 %s  p99 %s  p99.9 %s  max %s  allowed/denied/errors %s/%s/%s",
		head, fmtRate(s.ChecksPerSec), fmtMs(s.Latency.P50), fmtMs(s.Latency.P99), fmtMs(s.Latency.P999),
		fmtMs(s.Latency.Max), fmtInt(s.Allowed), fmtInt(s.Denied), fmtInt(s.Errors))
	if r.Rate > 0 {
		line += fmt.Sprintf("  offered %s/s", fmtRate(s.Offered))
	}
	if r.System != "echo" {
		line += "  accuracy " + accuracy(s.Audit)
	}
	line += fmt.Sprintf("  CPU %.2f s/1M (server %.1f s, client %.1f s)", r.CPUPerMillion, r.CPUServerSec, r.CPUClientSec)
	if r.Error != "" {
		line += "  error: " + r.Error
	}
	return line
}

func memLine(m MemResult) string {
	head := fmt.Sprintf("(e) %-16s", memSystemName(m.System))
	line := fmt.Sprintf("%s keys %s of %s in %.1f s  RSS %s (before %s, %.1f B/key)", head, fmtInt(m.Filled),
		fmtInt(m.Keys), m.FillSec, fmtBytes(m.RSS), fmtBytes(m.RSSBefore), m.bytesPerKey())
	if m.UsedMemory > 0 {
		line += "  used_memory " + fmtBytes(m.UsedMemory)
	}
	if m.Error != "" {
		line += "  error: " + m.Error
	}
	return line
}
