package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/bench"
)

const benchUsage = `Usage: sluice bench [--addr A[,B,C]] [--workers N] [--keys N | --hot] [--limit N --period D --burst N]
                    [--duration D] [--rate R] [--batch N] [--json] [--grants]
       sluice bench --rls [--rls-domain D] [--rls-key K] [--conns N] [--print-rls-config] [same load flags]

Drives checks at Sluice nodes through the Go client and reports checks/s,
latency percentiles (HDR histogram) and an accuracy audit: each key's admitted
checks against the most its token bucket allows in the run.

Without --rate, a closed loop: --workers callers, each waiting for its answer.
With --rate, an open loop: calls are due at a fixed rate and latency counts
from the due time, so a slow node shows as latency (coordinated omission
corrected).

With --rls, each call is an Envoy RLS v3 ShouldRateLimit (what Envoy sends)
with one descriptor [{K: key}] per key, in domain D, to the --addr nodes in
turn over --conns connections; a descriptor is admitted when its status is OK.
The nodes must serve the matching config (sluice serve --rls-config FILE):
--print-rls-config prints it for --rls-domain, --rls-key, --limit and
--period, and exits. Its fixed windows admit up to --limit in each window a
run touches, so the audit's burst is 2 × --limit.

While it runs, a progress line goes to stderr when stderr is a terminal; the
summary goes to stdout (JSON with --json). Exit 0 after a run whose share of
checks that failed with an error is at most --max-error-rate (default 0: any
error fails the run, as a bench against a broken or misconfigured node
measures nothing), 1 after a run over it or with no check answered, 2 on
bad flags or an interrupted run.

Flags:`

// runBench drives load at nodes and prints a bench.Summary.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, benchUsage)
		fs.PrintDefaults()
	}
	var (
		addr   listFlag
		period = periodFlag(time.Second)
	)
	fs.Var(&addr, "addr", "comma-separated gRPC address(es) of Sluice nodes (default 127.0.0.1:8081)")
	workers := fs.Int("workers", 8, "concurrent callers (closed loop) or senders (open loop)")
	keys := fs.Int("keys", 1000, "distinct keys, chosen uniformly at random per check")
	hot := fs.Bool("hot", false, "every check on one key (instead of --keys)")
	prefix := fs.String("key-prefix", "bench:", "keys are this prefix + a decimal index")
	limit := fs.Int64("limit", 100, "each key's token bucket: units per period")
	fs.Var(&period, "period", "the limit's period, e.g. 1s, 1m, 1h, 1d")
	burst := fs.Int64("burst", 0, "token bucket capacity (default: limit)")
	duration := fs.Duration("duration", 10*time.Second, "how long to run")
	rate := fs.Float64("rate", 0, "checks/s offered (open loop); 0 is a closed loop")
	batch := fs.Int("batch", 1, "keys per Check call (1..1000)")
	timeout := fs.Duration("timeout", 2*time.Second, "per-call deadline")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	grants := fs.Bool("grants", false, "turn on the client's local token grants for hot keys")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (go tool pprof) of the run to this file")
	inflight := fs.Int("max-inflight", 0, "the client's messages in flight per node before checks queue (0: the client's default, 2)")
	unary := fs.Bool("unary", false, "one unary Check per call, round-robin over --addr (the client's DisableRouting)")
	rls := fs.Bool("rls", false, "call Envoy RLS v3 ShouldRateLimit instead of sluice.v1 Check (needs the node's --rls-config)")
	rlsDomain := fs.String("rls-domain", "bench", "with --rls: the requests' domain")
	rlsKey := fs.String("rls-key", "key", "with --rls: the descriptor entry's key (its value is the bench's key)")
	conns := fs.Int("conns", 0, "with --rls: gRPC connections in all, spread over --addr (0: one per address)")
	var tf tlsFlags
	tf.register(fs)
	printRLS := fs.Bool("print-rls-config", false, "with --rls: print the ratelimit config the nodes need, and exit")
	maxErrRate := fs.Float64("max-error-rate", 0, "the share of checks (0..1) that may fail with an error before the run exits 1")
	describeEnv(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *workers < 1:
		return errors.New("--workers: must be >= 1")
	case *keys < 1:
		return errors.New("--keys: must be >= 1")
	case *hot && set["keys"]:
		return errors.New("--keys and --hot: give one")
	case *limit < 1:
		return errors.New("--limit: must be >= 1")
	case period <= 0:
		return errors.New("--period: must be > 0")
	case *burst < 0:
		return errors.New("--burst: must be >= 0")
	case *duration <= 0:
		return errors.New("--duration: must be > 0")
	case *rate < 0 || math.IsNaN(*rate) || math.IsInf(*rate, 0):
		return errors.New("--rate: must be >= 0 (0 is a closed loop)")
	case *batch < 1 || *batch > 1000:
		return errors.New("--batch: must be 1..1000")
	case *timeout <= 0:
		return errors.New("--timeout: must be > 0")
	case *conns < 0:
		return errors.New("--conns: must be >= 0")
	case !(*maxErrRate >= 0 && *maxErrRate <= 1):
		return errors.New("--max-error-rate: must be in [0, 1]")
	}
	if err := rlsFlagsAgree(*rls, set); err != nil {
		return err
	}
	addrs := []string(addr)
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:8081"}
	}
	cfg := bench.Config{
		Workers: *workers, Keys: *keys, Hot: *hot, KeyPrefix: *prefix,
		Limit: *limit, Period: time.Duration(period), Burst: *burst,
		Duration: *duration, Rate: *rate, Batch: *batch, Timeout: *timeout,
	}
	if isTerminal(stderr) {
		cfg.Progress = stderr
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	tcfg, err := tf.config()
	if err != nil {
		return err
	}
	var t bench.Target
	if *rls {
		rcfg := bench.RLSConfig{Addrs: addrs, Domain: *rlsDomain, Key: *rlsKey, Conns: *conns, TLS: tcfg}
		unit, err := bench.RLSUnit(time.Duration(period))
		if err != nil {
			return fmt.Errorf("--period: %w", err)
		}
		if *printRLS {
			_, err := io.WriteString(stdout, bench.RLSConfigYAML(rcfg, *limit, unit))
			return err
		}
		cfg.Burst = bench.RLSAuditBurst(*limit)
		if t, err = bench.NewRLSTarget(rcfg); err != nil {
			return err
		}
	} else {
		ccfg := client.Config{Addrs: addrs, MaxInflight: *inflight, DisableRouting: *unary, TLS: tcfg}
		if *grants {
			ccfg.Grants = &client.GrantOptions{}
		}
		if t, err = bench.NewSluiceTargetConfig(ccfg, *limit, *burst, time.Duration(period)); err != nil {
			return err
		}
	}
	defer t.Close()
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	s, runErr := bench.Run(ctx, cfg, t)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(s)
	} else {
		err = s.Format(stdout)
		if st, ok := t.(interface{ Stats() client.Stats }); ok && err == nil {
			cs := st.Stats()
			if cs.Messages > 0 {
				_, err = fmt.Fprintf(stdout, "transport:  %d checks in %d messages (%.2f a message), %d calls queued, %d retried, %d misrouted, %d members\n",
					cs.Items, cs.Messages, float64(cs.Items)/float64(cs.Messages), cs.Queued, cs.Retries, cs.Misrouted, cs.Members)
			}
		}
	}
	if runErr != nil {
		return fmt.Errorf("interrupted after %s: %w", s.Elapsed.Round(time.Millisecond), runErr)
	}
	if err != nil {
		return err
	}
	return errorRateExceeded(s, *maxErrRate)
}

// errorRateExceeded is nil when the run's share of checks that failed with
// an error is at most max, and wraps errBenchFailed otherwise (and when no
// check was answered at all).
func errorRateExceeded(s bench.Summary, max float64) error {
	if s.Checks == 0 {
		return fmt.Errorf("%w: no check answered", errBenchFailed)
	}
	if rate := float64(s.Errors) / float64(s.Checks); rate > max {
		return fmt.Errorf("%w: %d of %d checks failed (%.4g > --max-error-rate %g), first: %s",
			errBenchFailed, s.Errors, s.Checks, rate, max, s.FirstError)
	}
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// rlsFlagsAgree rejects flags that do not go with --rls (or need it).
func rlsFlagsAgree(rls bool, set map[string]bool) error {
	if rls {
		for _, f := range []string{"grants", "unary", "max-inflight", "burst"} {
			if set[f] {
				return fmt.Errorf("--%s: not with --rls (RLS calls go straight to the nodes; the audit's burst is 2 × --limit)", f)
			}
		}
		return nil
	}
	for _, f := range []string{"rls-domain", "rls-key", "conns", "print-rls-config"} {
		if set[f] {
			return fmt.Errorf("--%s: only with --rls", f)
		}
	}
	return nil
}
