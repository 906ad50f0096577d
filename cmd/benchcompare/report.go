package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/bench"
)

// The markers around the generated section of docs/benchmarks.md.
const (
	markerBegin = "<!-- bench-compare:begin -->"
	markerEnd   = "<!-- bench-compare:end -->"
)

// oneGB is the memory target of scenario e (10^9 bytes).
const oneGB = 1_000_000_000

// Report is everything one run measured; bin/bench-compare.json holds it.
type Report struct {
	Date        time.Time      `json:"date"`
	Machine     Machine        `json:"machine"`
	Command     string         `json:"command"`
	Flags       string         `json:"flags,omitempty"`
	DurationSec float64        `json:"duration_s"`
	Limit       string         `json:"limit"`
	Grants      string         `json:"sluice_client_grants_in"`
	NodeProcs   int            `json:"sluice_node_gomaxprocs"`
	KeysE       int64          `json:"keys_e"`
	Systems     []string       `json:"systems"`
	Scenarios   []ScenarioInfo `json:"scenarios"`
	Results     []Result       `json:"results"`
	Memory      []MemResult    `json:"memory,omitempty"`
	Interrupted bool           `json:"interrupted,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	NProc     int    `json:"nproc"`
	CPU       string `json:"cpu"`
	MemBytes  int64  `json:"mem_bytes"`
	GoVersion string `json:"go"`
	OSArch    string `json:"os_arch"`
	LoadAvg   string `json:"loadavg,omitempty"` // 1, 5 and 15 minutes, at the start
	Redis     string `json:"redis,omitempty"`
	Git       string `json:"git,omitempty"`
}

// ScenarioInfo is a load scenario as run.
type ScenarioInfo struct {
	ID      string  `json:"id"`
	Title   string  `json:"title"`
	Short   string  `json:"short"`
	Workers int     `json:"workers"`
	Keys    int     `json:"keys"`
	Rate    float64 `json:"rate,omitempty"`
}

// Result is one system's run of one scenario (a-d).
type Result struct {
	Scenario      string         `json:"scenario"`
	System        string         `json:"system"`
	Grants        bool           `json:"grants,omitempty"`
	Workers       int            `json:"workers"`
	Keys          int            `json:"keys"`
	Rate          float64        `json:"rate,omitempty"`
	DurationSec   float64        `json:"duration_s"`
	Summary       *bench.Summary `json:"summary,omitempty"`
	CPUServerSec  float64        `json:"cpu_server_s"`
	CPUClientSec  float64        `json:"cpu_client_s"`
	CPUPerMillion float64        `json:"cpu_s_per_1m_checks"`
	Error         string         `json:"error,omitempty"`
}

// ok reports whether the result has figures to compare.
func (r *Result) ok() bool { return r != nil && r.Summary != nil && r.Summary.Checks > 0 }

// MemResult is one system's scenario e.
type MemResult struct {
	System     string  `json:"system"`
	Keys       int64   `json:"keys"`
	Filled     int64   `json:"filled"`
	FillSec    float64 `json:"fill_s"`
	RSSBefore  int64   `json:"rss_before"`
	RSS        int64   `json:"rss"`
	UsedMemory int64   `json:"redis_used_memory,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// bytesPerKey is the growth of RSS per stored key.
func (m *MemResult) bytesPerKey() float64 {
	if m.Filled <= 0 || m.RSS <= 0 {
		return 0
	}
	return float64(m.RSS-m.RSSBefore) / float64(m.Filled)
}

func systemName(sys string) string {
	switch sys {
	case "sluice":
		return "Sluice (3 nodes)"
	case "redis":
		return "Redis + Lua"
	case "echo":
		return "gRPC echo"
	}
	return sys
}

// memSystemName is the system's name in scenario e (one node).
func memSystemName(sys string) string {
	if sys == "sluice" {
		return "Sluice (1 node)"
	}
	return systemName(sys)
}

// Target is one of the targets, judged.
type Target struct {
	Scenario string `json:"scenario"`
	Name     string `json:"name"`
	Measured string `json:"measured"`
	Status   string `json:"status"` // met, missed or n/a
}

const (
	statusMet    = "met"
	statusMissed = "missed"
	statusNA     = "n/a"
)

func judge(ok bool) string {
	if ok {
		return statusMet
	}
	return statusMissed
}

func (rep *Report) result(scenario, sys string) *Result {
	for i := range rep.Results {
		if rep.Results[i].Scenario == scenario && rep.Results[i].System == sys {
			return &rep.Results[i]
		}
	}
	return nil
}

func (rep *Report) memory(sys string) *MemResult {
	for i := range rep.Memory {
		if rep.Memory[i].System == sys {
			return &rep.Memory[i]
		}
	}
	return nil
}

func (rep *Report) ran(scenario string) bool {
	for _, s := range rep.Scenarios {
		if s.ID == scenario {
			return true
		}
	}
	return false
}

// evaluateTargets judges the targets against the run's results.
// A target whose figures are missing (not run, or failed) is n/a.
func evaluateTargets(rep *Report) []Target {
	var ts []Target
	na := func(sc, name, why string) Target {
		return Target{Scenario: sc, Name: name, Measured: why, Status: statusNA}
	}
	// pair returns Sluice's and Redis's results, or why they cannot be compared.
	pair := func(sc string) (*Result, *Result, string) {
		s, r := rep.result(sc, "sluice"), rep.result(sc, "redis")
		switch {
		case !s.ok():
			return nil, nil, "no Sluice result" + errSuffix(s)
		case !r.ok():
			return nil, nil, "no Redis result" + errSuffix(r)
		}
		return s, r, ""
	}
	for _, sc := range []string{"a", "b"} {
		if !rep.ran(sc) {
			continue
		}
		const n1, n2 = "checks/s ≥ 1.0× Redis's", "p99 ≤ Redis's p99"
		s, r, why := pair(sc)
		if why != "" {
			ts = append(ts, na(sc, n1, why), na(sc, n2, why))
			continue
		}
		ratio := s.Summary.ChecksPerSec / r.Summary.ChecksPerSec
		ts = append(ts, Target{sc, n1, fmt.Sprintf("%s vs %s checks/s (%.2f×)",
			fmtRate(s.Summary.ChecksPerSec), fmtRate(r.Summary.ChecksPerSec), ratio), judge(ratio >= 1.0)})
		ts = append(ts, Target{sc, n2, fmt.Sprintf("%s vs %s (%.2f×)", fmtMs(s.Summary.Latency.P99),
			fmtMs(r.Summary.Latency.P99), durRatio(s.Summary.Latency.P99, r.Summary.Latency.P99)),
			judge(s.Summary.Latency.P99 <= r.Summary.Latency.P99)})
	}
	if rep.ran("c") {
		const n1, n2 = "hot key checks/s ≥ 5× Redis's", "accuracy within the bound (0 keys over)"
		s, r, why := pair("c")
		if why != "" {
			ts = append(ts, na("c", n1, why))
		} else {
			ratio := s.Summary.ChecksPerSec / r.Summary.ChecksPerSec
			ts = append(ts, Target{"c", n1, fmt.Sprintf("%s vs %s checks/s (%.2f×)%s",
				fmtRate(s.Summary.ChecksPerSec), fmtRate(r.Summary.ChecksPerSec), ratio, grantsNote(s)), judge(ratio >= 5)})
		}
		if s := rep.result("c", "sluice"); !s.ok() {
			ts = append(ts, na("c", n2, "no Sluice result"+errSuffix(s)))
		} else {
			a := s.Summary.Audit
			ts = append(ts, Target{"c", n2, fmt.Sprintf("admitted %s of a bound of %s (%.3f), %d keys over%s",
				fmtInt(a.WorstAdmitted), fmtInt(a.Bound), a.WorstRatio, a.OverBound, grantsNote(s)), judge(a.OverBound == 0)})
		}
	}
	if rep.ran("d") {
		const n1, n2 = "achieved ≥ 99% of 100,000 checks/s offered", "p99 ≤ 5 ms (from the intended send time)"
		if s := rep.result("d", "sluice"); !s.ok() {
			why := "no Sluice result" + errSuffix(s)
			ts = append(ts, na("d", n1, why), na("d", n2, why))
		} else {
			want := s.Rate
			if want <= 0 {
				want = s.Summary.Offered
			}
			frac := s.Summary.ChecksPerSec / want
			ts = append(ts, Target{"d", n1, fmt.Sprintf("%s checks/s of %s (%.1f%%); %d errors",
				fmtRate(s.Summary.ChecksPerSec), fmtRate(want), 100*frac, s.Summary.Errors), judge(frac >= 0.99)})
			ts = append(ts, Target{"d", n2, fmtMs(s.Summary.Latency.P99), judge(s.Summary.Latency.P99 <= 5*time.Millisecond)})
		}
	}
	if rep.ran("e") || len(rep.Memory) > 0 {
		const n = "RSS ≤ 1 GB (10^9 bytes) with 10M keys on one node"
		m := rep.memory("sluice")
		switch {
		case m == nil:
			ts = append(ts, na("e", n, "not run"))
		case m.Error != "" || m.Filled <= 0 || m.RSS <= 0:
			ts = append(ts, na("e", n, "failed: "+m.Error))
		case m.Filled >= fullKeysE:
			ts = append(ts, Target{"e", n, fmt.Sprintf("%s for %s keys (%.1f B/key)", fmtBytes(m.RSS), fmtInt(m.Filled),
				m.bytesPerKey()), judge(m.RSS <= oneGB)})
		default:
			proj := m.RSSBefore + int64(m.bytesPerKey()*fullKeysE)
			ts = append(ts, Target{"e", n, fmt.Sprintf("projected %s for 10M keys from %s keys (RSS %s, %.1f B/key)",
				fmtBytes(proj), fmtInt(m.Filled), fmtBytes(m.RSS), m.bytesPerKey()), judge(proj <= oneGB)})
		}
	}
	for _, sc := range []string{"a", "b", "c", "d"} {
		if !rep.ran(sc) {
			continue
		}
		const n = "CPU per 1M checks (server + client) ≤ Redis's"
		s, r, why := pair(sc)
		if why != "" {
			ts = append(ts, na(sc, n, why))
			continue
		}
		if s.CPUPerMillion <= 0 || r.CPUPerMillion <= 0 {
			ts = append(ts, na(sc, n, "CPU not measured"))
			continue
		}
		ts = append(ts, Target{sc, n, fmt.Sprintf("%.2f vs %.2f CPU s (%.2f×)", s.CPUPerMillion, r.CPUPerMillion,
			s.CPUPerMillion/r.CPUPerMillion), judge(s.CPUPerMillion <= r.CPUPerMillion)})
	}
	return ts
}

func errSuffix(r *Result) string {
	if r == nil {
		return " (not run)"
	}
	if r.Error != "" {
		return ": " + r.Error
	}
	return ""
}

func grantsNote(r *Result) string {
	if r.Grants {
		return ", Sluice client grants on"
	}
	return ", Sluice client grants off"
}

func durRatio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}

// replaceSection returns doc with the text between the markers replaced by
// section, every other byte unchanged. Without both markers (in order) it
// appends them, with the section, at the end.
func replaceSection(doc, section string) string {
	if !strings.HasSuffix(section, "\n") {
		section += "\n"
	}
	b := strings.Index(doc, markerBegin)
	if b >= 0 {
		from := b + len(markerBegin)
		if e := strings.Index(doc[from:], markerEnd); e >= 0 {
			return doc[:from] + "\n" + section + doc[from+e:]
		}
	}
	sep := ""
	switch {
	case doc == "":
	case strings.HasSuffix(doc, "\n\n"):
	case strings.HasSuffix(doc, "\n"):
		sep = "\n"
	default:
		sep = "\n\n"
	}
	return doc + sep + markerBegin + "\n" + section + markerEnd + "\n"
}

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

func accuracy(a bench.Audit) string {
	if a.Bound <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s/%s (%.3f), %d over", fmtInt(a.WorstAdmitted), fmtInt(a.Bound), a.WorstRatio, a.OverBound)
}

// renderSection is the markdown between the markers.
func renderSection(rep *Report, targets []Target, svgLink string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Sluice vs Redis + Lua vs gRPC echo (`make bench-compare`)\n\n")
	w("Written by `make bench-compare` on %s; the command rewrites everything between the\n", rep.Date.Format("2006-01-02 15:04 MST"))
	w("`bench-compare` markers, so edit `cmd/benchcompare` rather than this text.\n\n")
	mc := rep.Machine
	w("| machine | |\n|---|---|\n")
	w("| CPUs | %d × %s |\n", mc.NProc, orDash(mc.CPU))
	w("| memory | %s |\n", fmtBytes(mc.MemBytes))
	w("| Go | %s %s |\n", mc.GoVersion, mc.OSArch)
	w("| load average at the start | %s |\n", orDash(mc.LoadAvg))
	w("| Redis | %s |\n", orDash(mc.Redis))
	w("| commit | `%s` |\n\n", orDash(mc.Git))
	w("```\n%s\n```\n\n", commandLine(rep))
	w("Every key's limit is %s. Each run of (a)–(d) lasts %s.\n", rep.Limit, fmtSeconds(rep.DurationSec))
	w("All three systems run on loopback on this machine and are loaded one at a time (the others\n")
	w("idle), by the same load generator (`internal/bench`) in the command's own process, scenario by\n")
	w("scenario.\n\n")
	for _, sys := range rep.Systems {
		switch sys {
		case "sluice":
			g := "off in every scenario"
			if rep.Grants != "" {
				g = fmt.Sprintf("on in (%s) only (grants are for hot keys; the table rows say which)", rep.Grants)
			}
			procs := "Go's default GOMAXPROCS"
			if rep.NodeProcs > 0 {
				procs = fmt.Sprintf("GOMAXPROCS=%d each (three nodes share the machine's cores, as Redis runs one thread)", rep.NodeProcs)
			}
			w("- **%s**: three `bin/sluice serve` processes in one gossip cluster, %s, called through the Go\n", systemName(sys), procs)
			w("  client, which sends each check to its key's owner and coalesces concurrent checks into messages on\n")
			w("  one stream per node; the client's local token grants %s.\n", g)
		case "redis":
			w("- **%s**: one `redis-server` (no persistence), the usual token bucket as a Lua script (a hash\n", systemName(sys))
			w("  per key, the client's clock), one EVALSHA per check through go-redis v9 with a pool of one\n")
			w("  connection per caller.\n")
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
		w("### (%s) %s\n\n", sc.ID, sc.Title)
		open := sc.Rate > 0
		if open {
			w("| system | offered/s | checks/s | p50 | p99 | p99.9 | max | allowed / denied / errors | accuracy | CPU s per 1M checks |\n")
			w("|---|---|---|---|---|---|---|---|---|---|\n")
		} else {
			w("| system | checks/s | p50 | p99 | p99.9 | max | allowed / denied / errors | accuracy | CPU s per 1M checks |\n")
			w("|---|---|---|---|---|---|---|---|---|\n")
		}
		for _, sys := range rep.Systems {
			r := rep.result(sc.ID, sys)
			name := systemName(sys)
			if sys == "sluice" && r != nil {
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
	if len(rep.Memory) > 0 {
		w("### (e) one node holding %s distinct keys\n\n", fmtInt(rep.KeysE))
		w("A fresh single node filled through its client in calls (Sluice) or pipelines of EVALSHA (Redis,\n")
		w("after FLUSHALL) of %s keys, each with a limit of %d per %s; then VmRSS from /proc. Bytes/key is the\n",
			fmtInt(memBatch), limitN, fmtPeriod(memPeriod))
		w("growth of RSS over the fill divided by the keys stored.\n\n")
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
	if len(targets) > 0 {
		w("### Targets\n\n")
		w("| scenario | target (Sluice) | measured (Sluice vs Redis + Lua) | result |\n|---|---|---|---|\n")
		for _, t := range targets {
			st := t.Status
			if st == statusMissed {
				st = "**missed**"
			}
			w("| (%s) | %s | %s | %s |\n", t.Scenario, t.Name, mdEscape(t.Measured), st)
		}
		w("\n")
	}
	if svgLink != "" {
		w("Latency by percentile, one tile per scenario:\n\n![latency](%s)\n\n", svgLink)
	}
	if rep.Interrupted {
		w("The run was interrupted: the figures above are partial.\n\n")
	}
	return b.String()
}

// renderHeadline is the compact table for the README.
func renderHeadline(rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario |")
	for _, sys := range rep.Systems {
		fmt.Fprintf(&b, " %s |", systemName(sys))
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
			fmt.Fprintf(&b, " %s/s, p99 %s, %.1f CPU s/1M |", fmtRate(r.Summary.ChecksPerSec), fmtMs(r.Summary.Latency.P99), r.CPUPerMillion)
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

// fmtInt formats n with thousands separators.
func fmtInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtRate(f float64) string { return fmtInt(int64(math.Round(f))) }

// fmtMs formats a latency in milliseconds with 3 significant digits.
func fmtMs(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms < 1:
		return fmt.Sprintf("%.3f ms", ms)
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func fmtSeconds(s float64) string {
	return strconv.FormatFloat(s, 'f', -1, 64) + " s"
}

// fmtPeriod names a limit's period: "second", "hour", or the duration.
func fmtPeriod(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	}
	return d.String()
}
