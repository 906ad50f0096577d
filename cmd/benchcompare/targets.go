package main

import (
	"fmt"
	"math"
	"time"
)

// oneGB is the memory target of scenario e (10^9 bytes).
const oneGB = 1_000_000_000

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
		// Issue 16 (e): the growth of RSS per key at 10M keys, with the
		// node's default GC settings (README: --gc-percent, --memory-limit).
		const nk = "≤ 48 B/key of node RSS with 10M keys (default GC settings)"
		switch {
		case m == nil:
			ts = append(ts, na("e", nk, "not run"))
		case m.Error != "" || m.Filled <= 0 || m.RSS <= 0:
			ts = append(ts, na("e", nk, "failed: "+m.Error))
		case m.Filled >= fullKeysE:
			ts = append(ts, Target{"e", nk, fmt.Sprintf("%.1f B/key (RSS %s before, %s after)", m.bytesPerKey(),
				fmtBytes(m.RSSBefore), fmtBytes(m.RSS)), judge(m.bytesPerKey() <= 48)})
		default:
			ts = append(ts, na("e", nk, fmt.Sprintf("%.1f B/key from %s keys only", m.bytesPerKey(), fmtInt(m.Filled))))
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
	ts = append(ts, gubTargets(rep)...)
	return append(ts, rlsTargets(rep)...)
}

// rlsTargets judges the RLS target of scenario g for each Sluice (3
// nodes called in turn or at the owner, 1 node) that ran: at 64 callers, Sluice answers at least 3×
// envoyproxy/ratelimit's calls/s with a lower p99.
func rlsTargets(rep *Report) []Target {
	if !rep.ran("g") {
		return nil
	}
	var ts []Target
	for _, sys := range []string{"sluice", "sluice-owner", "sluice1"} {
		if contains(rep.Systems, sys) {
			ts = append(ts, rlsTargetsOf(rep, sys)...)
		}
	}
	return ts
}

// rlsTargetsOf judges scenario g's targets for one Sluice system.
func rlsTargetsOf(rep *Report, sys string) []Target {
	n1, n2 := systemName(sys)+": calls/s ≥ 3× envoyproxy/ratelimit's", systemName(sys)+": p99 < envoyproxy/ratelimit's p99"
	s, r := rep.result("g", sys), rep.result("g", "ratelimit")
	why := ""
	switch {
	case !s.ok():
		why = "no Sluice result" + errSuffix(s)
	case !r.ok():
		why = "no envoyproxy/ratelimit result" + errSuffix(r)
	}
	if why != "" {
		return []Target{{"g", n1, why, statusNA}, {"g", n2, why, statusNA}}
	}
	ratio := s.Summary.ChecksPerSec / r.Summary.ChecksPerSec
	return []Target{
		{"g", n1, fmt.Sprintf("%s vs %s calls/s (%.2f×)", fmtRate(s.Summary.ChecksPerSec), fmtRate(r.Summary.ChecksPerSec), ratio),
			judge(ratio >= 3)},
		{"g", n2, fmt.Sprintf("%s vs %s (%.2f×)", fmtMs(s.Summary.Latency.P99), fmtMs(r.Summary.Latency.P99),
			durRatio(s.Summary.Latency.P99, r.Summary.Latency.P99)), judge(s.Summary.Latency.P99 < r.Summary.Latency.P99)},
	}
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
