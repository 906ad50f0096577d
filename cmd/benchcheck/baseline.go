package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ErrBaseline wraps every error of reading a baseline file.
var ErrBaseline = errors.New("benchcheck: baseline")

// A figure is one measured count: name is "pkg/Benchmark/sub", metric
// "allocs/op" or "instr/op".
type figure struct {
	name, metric string
	value        float64
	// tolerance is the fraction value may grow by before the check fails
	// (0 for allocations: they must not grow).
	tolerance float64
}

func (f figure) key() string { return f.name + " " + f.metric }

// allocSlack is how far allocs/op may exceed its baseline: half an
// allocation, so that a node's background work (its share per check
// varies with the load) never fails the check, and one more allocation
// per check always does.
const allocSlack = 0.5

// metrics are the counts a baseline may hold, with their default
// tolerance.
var metrics = map[string]float64{
	"allocs/op": 0,
	"instr/op":  0.05,
}

// parseBaseline reads a baseline file: '#' comments and blank lines, then
// one figure a line, "name metric value [tolerance%]".
func parseBaseline(r io.Reader) ([]figure, error) {
	var out []figure
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f, err := parseFigure(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrBaseline, ln, err)
		}
		if seen[f.key()] {
			return nil, fmt.Errorf("%w: line %d: name: %s %s appears twice", ErrBaseline, ln, f.name, f.metric)
		}
		seen[f.key()] = true
		out = append(out, f)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBaseline, err)
	}
	return out, nil
}

func parseFigure(line string) (figure, error) {
	fields := strings.Fields(line)
	if len(fields) < 3 || len(fields) > 4 {
		return figure{}, fmt.Errorf("want name metric value [tolerance%%], got %d fields", len(fields))
	}
	f := figure{name: fields[0], metric: fields[1]}
	tol, ok := metrics[f.metric]
	if !ok {
		return figure{}, fmt.Errorf("metric: %q: want allocs/op or instr/op", f.metric)
	}
	v, err := strconv.ParseFloat(fields[2], 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return figure{}, fmt.Errorf("value: %q: want a number >= 0", fields[2])
	}
	f.value, f.tolerance = v, tol
	if len(fields) == 4 {
		pct, found := strings.CutSuffix(fields[3], "%")
		t, err := strconv.ParseFloat(pct, 64)
		if !found || err != nil || t < 0 || t > 100 {
			return figure{}, fmt.Errorf("tolerance: %q: want a percentage from 0%% to 100%%", fields[3])
		}
		f.tolerance = t / 100
	}
	return f, nil
}

// formatBaseline writes figures in parseBaseline's format, after header
// (comment lines without their '#').
func formatBaseline(w io.Writer, header []string, figs []figure) error {
	var b strings.Builder
	for _, h := range header {
		b.WriteString(strings.TrimRight("# "+h, " ") + "\n")
	}
	figs = append([]figure(nil), figs...)
	sort.SliceStable(figs, func(i, j int) bool { return figs[i].key() < figs[j].key() })
	for _, f := range figs {
		fmt.Fprintf(&b, "%-44s %-9s %s", f.name, f.metric, strconv.FormatFloat(f.value, 'f', -1, 64))
		if f.tolerance != metrics[f.metric] {
			fmt.Fprintf(&b, " %s%%", strconv.FormatFloat(f.tolerance*100, 'f', -1, 64))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// A verdict compares one measured figure with its baseline.
type verdict struct {
	base, got figure
	missing   bool // measured nothing for a baseline figure
	fail      bool
	note      string
}

// compare checks each baseline figure against the measured ones: a count
// above its baseline by more than its tolerance fails, as does a baseline
// figure nothing measured. Figures measured without a baseline are
// reported, not failed (make bench-check UPDATE=1 records them).
func compare(base, got []figure) []verdict {
	byKey := map[string]figure{}
	for _, g := range got {
		byKey[g.key()] = g
	}
	var out []verdict
	for _, b := range base {
		g, ok := byKey[b.key()]
		delete(byKey, b.key())
		v := verdict{base: b, got: g}
		switch {
		case !ok:
			v.missing, v.fail, v.note = true, true, "not measured"
		case g.value > b.value*(1+b.tolerance)+slack(b.metric):
			v.fail, v.note = true, "over the baseline by more than "+allowance(b)
		case g.value < b.value*(1-max(b.tolerance, 0.005))-slack(b.metric):
			v.note = "below the baseline: record it with make bench-check UPDATE=1"
		default:
			v.note = "ok"
		}
		out = append(out, v)
	}
	var extra []string
	for k := range byKey {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		out = append(out, verdict{got: byKey[k], note: "no baseline: record it with make bench-check UPDATE=1"})
	}
	return out
}

// slack is the absolute allowance of metric beyond its tolerance.
func slack(metric string) float64 {
	if metric == "allocs/op" {
		return allocSlack
	}
	return 0
}

// allowance says how far b may grow.
func allowance(b figure) string {
	pct := strconv.FormatFloat(b.tolerance*100, 'f', -1, 64) + "%"
	if s := slack(b.metric); s > 0 {
		if b.tolerance == 0 {
			return strconv.FormatFloat(s, 'f', -1, 64)
		}
		return pct + " + " + strconv.FormatFloat(s, 'f', -1, 64)
	}
	return pct
}

// report writes the verdicts as a table and says whether any failed.
func report(w io.Writer, vs []verdict) (failed bool) {
	fmt.Fprintf(w, "%-44s %-9s %12s %12s %8s  %s\n", "benchmark", "metric", "baseline", "measured", "delta", "verdict")
	for _, v := range vs {
		name, metric := v.base.name, v.base.metric
		if name == "" {
			name, metric = v.got.name, v.got.metric
		}
		baseText, gotText, delta := "-", "-", ""
		if v.base.name != "" {
			baseText = strconv.FormatFloat(v.base.value, 'f', -1, 64)
		}
		if !v.missing {
			gotText = strconv.FormatFloat(v.got.value, 'f', -1, 64)
		}
		if v.base.name != "" && !v.missing && v.base.value > 0 {
			delta = fmt.Sprintf("%+.1f%%", 100*(v.got.value-v.base.value)/v.base.value)
		} else if v.base.name != "" && !v.missing {
			delta = fmt.Sprintf("%+g", v.got.value-v.base.value)
		}
		mark := v.note
		if v.fail {
			mark = "FAIL: " + v.note
			failed = true
		}
		fmt.Fprintf(w, "%-44s %-9s %12s %12s %8s  %s\n", name, metric, baseText, gotText, delta, mark)
	}
	return failed
}
