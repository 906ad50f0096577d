package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// procsSuffix is the -GOMAXPROCS suffix go test adds to a benchmark's name.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// parseBenchOutput reads the allocs/op of each benchmark line of go test
// -benchmem's output, named pkg/BenchmarkName/sub (without the
// GOMAXPROCS suffix).
func parseBenchOutput(pkg, text string) ([]figure, error) {
	var out []figure
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := pkg + "/" + procsSuffix.ReplaceAllString(fields[0], "")
		// node-allocs/op (BenchmarkNodeCheck's, unrounded) wins over
		// go test's allocs/op, which it truncates to a whole number.
		units := map[string]float64{}
		for i := 2; i+1 < len(fields); i += 2 {
			if u := fields[i+1]; u == "allocs/op" || u == "node-allocs/op" {
				v, err := strconv.ParseFloat(fields[i], 64)
				if err != nil {
					return nil, fmt.Errorf("%s: %s %q: %v", name, u, fields[i], err)
				}
				units[u] = v
			}
		}
		v, ok := units["node-allocs/op"]
		if !ok {
			v, ok = units["allocs/op"]
		}
		if ok {
			out = append(out, figure{name: name, metric: "allocs/op", value: math.Round(v*100) / 100})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no benchmark reported allocs/op", pkg)
	}
	return out, nil
}

// lastMarkedDump returns the instructions of the last dump callgrind made
// at --dump-before (out.1, out.2, ...: one per run of the benchmark
// function, the last the measured one), from its "totals:" line.
func lastMarkedDump(out string) (uint64, error) {
	parts, err := filepath.Glob(out + ".*")
	if err != nil {
		return 0, err
	}
	num := func(p string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(p, out+"."))
		return n
	}
	sort.Slice(parts, func(i, j int) bool { return num(parts[i]) < num(parts[j]) })
	for i := len(parts) - 1; i >= 0; i-- {
		total, marked, err := dumpTotals(parts[i])
		if err != nil {
			return 0, err
		}
		if marked {
			return total, nil
		}
	}
	return 0, fmt.Errorf("%s: no callgrind dump at callgrindDump (is the marker inlined or renamed?)", out)
}

// dumpTotals reads a callgrind dump's total instructions and whether the
// marker triggered it.
func dumpTotals(path string) (total uint64, marked bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "desc: Trigger:") && strings.Contains(line, "callgrindDump") {
			marked = true
		}
		if v, ok := strings.CutPrefix(line, "totals:"); ok {
			fs := strings.Fields(v)
			if len(fs) == 0 {
				return 0, false, fmt.Errorf("%s: empty totals line", path)
			}
			if total, err = strconv.ParseUint(fs[0], 10, 64); err != nil {
				return 0, false, fmt.Errorf("%s: totals: %v", path, err)
			}
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, false, err
	}
	if !found {
		return 0, false, fmt.Errorf("%s: no totals line", path)
	}
	return total, marked, nil
}
