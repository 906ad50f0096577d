// Command benchcheck is make bench-check: it measures a short, stable set
// of counts per check (allocations from go test -benchmem, and
// instructions counted by valgrind's callgrind) and compares them with
// the committed baseline (baseline.txt beside this file). A count above
// its baseline by more than its tolerance fails the run; -update writes
// the measured counts as the new baseline instead.
//
//	go run ./cmd/benchcheck [-update] [-baseline cmd/benchcheck/baseline.txt]
//
// Time per check is not checked: on a shared machine it is noise, and the
// counts are not.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// allocBench is one go test -bench run whose allocs/op are checked.
type allocBench struct {
	pkg, bench, benchtime string
}

// allocBenches: the node's single-item check over gRPC (the Go client's
// stream) and HTTP, with the client in another process so that only the
// node's allocations count; the limiter's local check (with and without
// the status page's recorder); the Envoy RLS path in process.
var allocBenches = []allocBench{
	{"node", `^BenchmarkNodeCheck$/^(grpc|http)$/^callers=1$`, "5000x"},
	{"limiter", `^BenchmarkCheckActivity$`, "200000x"},
	{"api", `^BenchmarkShouldRateLimit$/^descriptors=1$`, "50000x"},
}

// instrBench is one BenchmarkNodeCheck case counted under callgrind.
type instrBench struct {
	sub    string // the sub-benchmark, e.g. "grpc/callers=1"
	checks int
}

// instrRuns is how many times each is counted.
const instrRuns = 2

var instrBenches = []instrBench{
	{"grpc/callers=1", 1500},
	{"http/callers=1", 1500},
}

func main() {
	update := flag.Bool("update", false, "write the measured counts to the baseline instead of checking them")
	path := flag.String("baseline", filepath.Join("cmd", "benchcheck", "baseline.txt"), "the baseline file")
	flag.Parse()
	if err := run(*path, *update, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchcheck:", err)
		os.Exit(1)
	}
}

// errFailed is a check that ran and found a count over its baseline.
var errFailed = errors.New("a count is over its baseline (see above); if the change is intended, record it with make bench-check UPDATE=1")

func run(path string, update bool, out io.Writer) error {
	var base []figure
	if !update {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		base, err = parseBaseline(f)
		_ = f.Close()
		if err != nil {
			return err
		}
	}
	got, err := measure(out)
	if err != nil {
		return err
	}
	if update {
		return writeBaseline(path, got)
	}
	fmt.Fprintf(out, "\nbench-check on %s, %s:\n", cpuModel(), runtime.Version())
	if report(out, compare(base, got)) {
		return errFailed
	}
	return nil
}

// writeBaseline writes got to path, keeping the tolerances path had.
func writeBaseline(path string, got []figure) error {
	if f, err := os.Open(path); err == nil {
		old, perr := parseBaseline(f)
		_ = f.Close()
		if perr == nil {
			tol := map[string]float64{}
			for _, o := range old {
				tol[o.key()] = o.tolerance
			}
			for i := range got {
				if t, ok := tol[got[i].key()]; ok {
					got[i].tolerance = t
				}
			}
		}
	}
	header := []string{
		"make bench-check's baseline: counts per check that must not grow (allocs/op) or grow by at",
		"most their tolerance (instr/op: 5% unless a percentage follows the value). Written by",
		"make bench-check UPDATE=1 on " + cpuModel() + ", " + runtime.Version() + ".",
		"Format: name metric value [tolerance%]; name is package/Benchmark/sub-benchmark.",
	}
	var b bytes.Buffer
	if err := formatBaseline(&b, header, got); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// measure runs the benchmarks and callgrind, echoing their output.
func measure(out io.Writer) ([]figure, error) {
	var got []figure
	for _, ab := range allocBenches {
		args := []string{"test", "-run", "^$", "-bench", ab.bench, "-benchmem", "-benchtime", ab.benchtime, "-count", "1", "./" + ab.pkg + "/"}
		fmt.Fprintln(out, "== go", strings.Join(args, " "))
		text, err := command(out, "go", args...)
		if err != nil {
			return nil, err
		}
		figs, err := parseBenchOutput(ab.pkg, text)
		if err != nil {
			return nil, err
		}
		got = append(got, figs...)
	}
	instr, err := measureInstructions(out)
	if err != nil {
		return nil, err
	}
	return append(got, instr...), nil
}

// measureInstructions counts the node's instructions per check under
// callgrind, between BenchmarkNodeCheck's markers.
func measureInstructions(out io.Writer) ([]figure, error) {
	if _, err := exec.LookPath("valgrind"); err != nil {
		return nil, errors.New("valgrind is not installed (apt-get install valgrind): it counts the instructions per check")
	}
	dir, err := os.MkdirTemp("", "benchcheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "node.test")
	fmt.Fprintln(out, "== go test -c ./node/")
	if _, err := command(out, "go", "test", "-c", "-o", bin, "./node/"); err != nil {
		return nil, err
	}
	var got []figure
	for i, ib := range instrBenches {
		cg := filepath.Join(dir, fmt.Sprintf("cg%d.out", i))
		args := []string{"--tool=callgrind", "--callgrind-out-file=" + cg,
			"--zero-before=*callgrindZero", "--dump-before=*callgrindDump",
			bin, "-test.run", "^$", "-test.bench", "^BenchmarkNodeCheck$/^" + strings.Replace(ib.sub, "/", "$/^", 1) + "$",
			"-test.benchtime", fmt.Sprintf("%dx", ib.checks)}
		// The fewest of instrRuns runs: what varies from run to run (the
		// OS threads the scheduler starts, its spinning) only adds.
		var least uint64
		for r := range instrRuns {
			fmt.Fprintln(out, "== GOGC=off GOMAXPROCS=1 valgrind", strings.Join(args, " "))
			if _, err := command(out, "valgrind", args...); err != nil {
				return nil, err
			}
			total, err := lastMarkedDump(cg)
			if err != nil {
				return nil, err
			}
			if r == 0 || total < least {
				least = total
			}
			if err := removeDumps(cg); err != nil {
				return nil, err
			}
		}
		got = append(got, figure{name: "node/BenchmarkNodeCheck/" + ib.sub, metric: "instr/op",
			value: float64(least / uint64(ib.checks)), tolerance: metrics["instr/op"]})
	}
	return got, nil
}

// removeDumps removes callgrind's files of out.
func removeDumps(out string) error {
	parts, err := filepath.Glob(out + "*")
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	return nil
}

// command runs name with args, its output echoed to out, and returns its
// standard output.
func command(out io.Writer, name string, args ...string) (string, error) {
	var stdout bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout = io.MultiWriter(&stdout, out)
	cmd.Stderr = out
	if name == "valgrind" {
		// Under callgrind: no garbage collection, whose cycles fall in the
		// measured checks or not and so vary the count by some 20% (the
		// allocations per check guard its cost); one P, as idle Ps
		// spinning for work vary it too; no preemption signals
		// (valgrind's signal handling is fragile); the benchmark ignores
		// its client's SIGCHLD; no RDTSCP, which valgrind 3.19 cannot
		// decode on some CPUs (AMD Turin) that report it, so Go's
		// cputicks uses RDTSC instead.
		cmd.Env = append(os.Environ(), "GOGC=off", "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off", "SLUICE_BENCH_CALLGRIND=1")
	}
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return stdout.String(), nil
}

// cpuModel names this machine's CPU, from /proc/cpuinfo.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
