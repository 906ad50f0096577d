package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "echo-server" {
		if err := runEchoServer(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "echo-server:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "benchcompare:", err)
		}
		os.Exit(1)
	}
}

// options are the command line's settings.
type options struct {
	duration  time.Duration
	quick     bool
	out       string
	svg       string
	jsonOut   string
	headline  string
	keysE     int64
	only      map[string]bool
	systems   []string // in the order given
	sluiceBin string
	// ratelimitBin is envoyproxy/ratelimit (make rlsref), for f and g.
	ratelimitBin string
	// gubernatorBin is Gubernator v2 (make gubref), for a-d.
	gubernatorBin string
	rlsSVG        string
	grants        string // the scenarios in which Sluice's client holds grants, e.g. "c"
	curveDuration time.Duration
	// nodeProcs is each Sluice node's GOMAXPROCS (0: Go's default).
	nodeProcs int
	flagsText string // the flags given, for the report's command line
}

// grantsIn reports whether Sluice's client holds grants in scenario id.
func (o *options) grantsIn(id string) bool {
	for _, s := range strings.Split(o.grants, ",") {
		if strings.TrimSpace(s) == id {
			return true
		}
	}
	return false
}

// nodeEnv is the environment added to each Sluice node's.
func (o *options) nodeEnv() []string {
	if o.nodeProcs <= 0 {
		return nil
	}
	return []string{fmt.Sprintf("GOMAXPROCS=%d", o.nodeProcs)}
}

// allSystems are the systems, in report order.
var allSystems = []string{"sluice", "sluice-nogrants", "sluice-owner", "sluice1", "redis", "gubernator", "echo", "ratelimit"}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("benchcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "duration of each run of scenarios a-d")
	fs.BoolVar(&o.quick, "quick", false, "a quick try: runs of 5s (unless --duration is given)")
	fs.StringVar(&o.out, "out", "docs/benchmarks.md", "markdown file whose bench-compare section is replaced (empty: none)")
	fs.StringVar(&o.svg, "svg", "docs/bench-compare-latency.svg", "latency plot to write (empty: none)")
	fs.StringVar(&o.jsonOut, "json", "bin/bench-compare.json", "all results as JSON")
	fs.StringVar(&o.headline, "headline", "bin/bench-compare-headline.md", "the compact headline table, for the README")
	fs.Int64Var(&o.keysE, "keys-e", 10_000_000, "distinct keys filled into one node in scenario e")
	only := fs.String("only", "a,b,c,d,e,f,g,h", "scenarios to run, comma-separated; rls is f,g (Envoy RLS); h is throughput vs callers (1, 8, 64, 256)")
	fs.DurationVar(&o.curveDuration, "curve-duration", 5*time.Second, "duration of each point of scenario h (throughput vs callers)")
	systems := fs.String("systems", "sluice,sluice-nogrants,sluice-owner,sluice1,redis,gubernator,echo,ratelimit", "systems to run, comma-separated (sluice-nogrants: the same 3-node Sluice with the client's grants off, in the scenarios where --grants turns them on; sluice-owner: the same 3-node Sluice with each RLS call sent to its descriptor's owner, in f and g only; sluice1: a 1-node Sluice, and ratelimit: envoyproxy/ratelimit + Redis, in f and g only; gubernator: Gubernator v2, 3 nodes, in a-d only)")
	fs.StringVar(&o.sluiceBin, "sluice", "bin/sluice", "the sluice binary (make build)")
	fs.StringVar(&o.ratelimitBin, "ratelimit", "bin/ratelimit", "envoyproxy/ratelimit's binary, for f and g (make rlsref)")
	fs.StringVar(&o.gubernatorBin, "gubernator", "bin/gubernator", "Gubernator v2's binary, for a-d (make gubref)")
	fs.StringVar(&o.rlsSVG, "rls-svg", "docs/bench-compare-rls-latency.svg", "the RLS scenarios' latency plot (empty: none)")
	fs.StringVar(&o.grants, "grants", "a,b,c,d,h", "scenarios in which Sluice's Go client holds local token grants (its default options: keys above 10 checks/s in the client), comma-separated; \"\" for none")
	fs.IntVar(&o.nodeProcs, "node-gomaxprocs", 1, "GOMAXPROCS of each Sluice node: three nodes share the machine's cores (0: Go's default, all cores)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	var given []string
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		switch {
		case f.Name == "sluice" || f.Name == "ratelimit" || f.Name == "gubernator":
		case f.Value.String() == "true":
			given = append(given, "--"+f.Name)
		case f.Value.String() == "false":
			given = append(given, "--"+f.Name+"=false")
		default:
			given = append(given, "--"+f.Name+" "+f.Value.String())
		}
	})
	o.flagsText = strings.Join(given, " ")
	if o.quick && !set["duration"] {
		o.duration = 5 * time.Second
	}
	if abs, err := filepath.Abs(o.sluiceBin); err == nil {
		o.sluiceBin = abs
	}
	if abs, err := filepath.Abs(o.ratelimitBin); err == nil {
		o.ratelimitBin = abs
	}
	if abs, err := filepath.Abs(o.gubernatorBin); err == nil {
		o.gubernatorBin = abs
	}
	if o.duration <= 0 {
		return nil, fmt.Errorf("--duration: must be > 0")
	}
	if o.curveDuration <= 0 {
		return nil, fmt.Errorf("--curve-duration: must be > 0")
	}
	if o.keysE <= 0 {
		return nil, fmt.Errorf("--keys-e: must be > 0")
	}
	o.only = map[string]bool{}
	for s := range strings.SplitSeq(*only, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if s == "rls" {
			o.only["f"], o.only["g"] = true, true
			continue
		}
		if !strings.Contains(scenarioIDs, s) || len(s) != 1 {
			return nil, fmt.Errorf("--only: %q is not one of a, b, c, d, e, f, g, h, rls", s)
		}
		o.only[s] = true
	}
	if len(o.only) == 0 {
		return nil, fmt.Errorf("--only: no scenario")
	}
	for s := range strings.SplitSeq(*systems, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !contains(allSystems, s) {
			return nil, fmt.Errorf("--systems: %q is not one of %s", s, strings.Join(allSystems, ", "))
		}
		if !contains(o.systems, s) {
			o.systems = append(o.systems, s)
		}
	}
	if len(o.systems) == 0 {
		return nil, fmt.Errorf("--systems: no system")
	}
	// Report order, whatever the order given.
	var ordered []string
	for _, s := range allSystems {
		if contains(o.systems, s) {
			ordered = append(ordered, s)
		}
	}
	o.systems = ordered
	return o, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	r, err := newRunner(o, stdout, stderr)
	if err != nil {
		return err
	}
	defer r.cs.stopAll()
	rep, err := r.runAll(ctx)
	if werr := r.writeJSON(rep); werr != nil {
		fmt.Fprintln(stderr, "benchcompare:", werr)
	}
	if err != nil {
		return err
	}
	return r.writeOutputs(rep)
}
