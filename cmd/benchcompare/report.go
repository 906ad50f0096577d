package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/bench"
)

// Report is everything one run measured; bin/bench-compare.json holds it.
type Report struct {
	Date        time.Time `json:"date"`
	Machine     Machine   `json:"machine"`
	Command     string    `json:"command"`
	Flags       string    `json:"flags,omitempty"`
	DurationSec float64   `json:"duration_s"`
	Limit       string    `json:"limit"`
	Grants      string    `json:"sluice_client_grants_in"`
	NodeProcs   int       `json:"sluice_node_gomaxprocs"`
	KeysE       int64     `json:"keys_e"`
	Systems     []string  `json:"systems"`
	// RLSConfig is the ratelimit config of the RLS scenarios (f, g).
	RLSConfig string         `json:"rls_config,omitempty"`
	Scenarios []ScenarioInfo `json:"scenarios"`
	// Curve is the callers of scenario h's points, whose results are
	// scenarios h1, h8, ...
	Curve       []int       `json:"curve_callers,omitempty"`
	Results     []Result    `json:"results"`
	Memory      []MemResult `json:"memory,omitempty"`
	Interrupted bool        `json:"interrupted,omitempty"`
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
	Ratelimit string `json:"ratelimit,omitempty"` // envoyproxy/ratelimit's module version
	// Gubernator is Gubernator's module version.
	Gubernator string `json:"gubernator,omitempty"`
	Git        string `json:"git,omitempty"`
}

// ScenarioInfo is a load scenario as run.
type ScenarioInfo struct {
	ID      string  `json:"id"`
	Title   string  `json:"title"`
	Short   string  `json:"short"`
	Workers int     `json:"workers"`
	Keys    int     `json:"keys"`
	Rate    float64 `json:"rate,omitempty"`
	RLS     bool    `json:"rls,omitempty"`
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
	case "sluice-nogrants":
		return "Sluice (3 nodes), grants off"
	case "sluice-owner":
		return "Sluice (3 nodes), to the owner"
	case "sluice1":
		return "Sluice (1 node)"
	case "redis":
		return "Redis + Lua"
	case "echo":
		return "gRPC echo"
	case "ratelimit":
		return "envoyproxy/ratelimit + Redis"
	case "gubernator":
		return "Gubernator v2 (3 nodes)"
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

// machineInfo describes this machine for the report.
func machineInfo(redisBin string) Machine {
	mc := Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), OSArch: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				mc.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					mc.MemBytes = kb * 1024
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			mc.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	if redisBin != "" {
		mc.Redis = commandOutput(redisBin, "--version")
	}
	mc.Git = commandOutput("git", "describe", "--tags", "--always", "--dirty")
	return mc
}
