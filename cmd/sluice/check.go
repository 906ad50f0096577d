package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/policy"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// limitFlags are the flags shared by check and usage.
type limitFlags struct {
	addr      listFlag
	policy    string
	limit     int64
	period    periodFlag
	burst     int64
	algorithm string
	failure   string
	asJSON    bool
	timeout   time.Duration
	tls       tlsFlags
}

func (lf *limitFlags) register(fs *flag.FlagSet) {
	fs.Var(&lf.addr, "addr", "comma-separated gRPC address(es) of Sluice nodes (default "+defaultAddr+")")
	fs.StringVar(&lf.policy, "policy", "", "name of a configured policy (instead of --limit/--period)")
	fs.Int64Var(&lf.limit, "limit", 0, "units per period")
	fs.Var(&lf.period, "period", "period, e.g. 1s, 1m, 1h, 1d")
	fs.Int64Var(&lf.burst, "burst", 0, "token bucket capacity (default: limit)")
	fs.StringVar(&lf.algorithm, "algorithm", "token_bucket", "token_bucket, sliding_window, fixed_window, sliding_log, concurrency or fixed_window_hits")
	fs.StringVar(&lf.failure, "failure-mode", "local", "when the owner is unreachable: local, deny or allow")
	fs.BoolVar(&lf.asJSON, "json", false, "print the result as JSON")
	fs.DurationVar(&lf.timeout, "timeout", 2*time.Second, "call timeout")
	lf.tls.register(fs)
}

// clientLimit converts the flags to a client limit.
func (lf *limitFlags) clientLimit() (client.Limit, error) {
	l := client.Limit{Limit: lf.limit, Period: time.Duration(lf.period), Burst: lf.burst}
	v, ok := sluicev1.Algorithm_value["ALGORITHM_"+strings.ToUpper(lf.algorithm)]
	if !ok {
		return l, fmt.Errorf("--algorithm: unknown algorithm %q", lf.algorithm)
	}
	l.Algorithm = sluicev1.Algorithm(v)
	m, err := policy.ParseFailureMode(lf.failure)
	if err != nil {
		return l, fmt.Errorf("--failure-mode: %w", err)
	}
	l.FailureMode = sluicev1.FailureMode(int32(m) + 1)
	if lf.policy == "" {
		if lf.limit == 0 {
			return l, errors.New("--limit is required (or --policy)")
		}
		if lf.period == 0 && l.Algorithm != client.Concurrency {
			return l, errors.New("--period is required (or --policy)")
		}
	}
	return l, nil
}

func (lf *limitFlags) dial() (*client.Client, error) {
	addrs := []string(lf.addr)
	if len(addrs) == 0 {
		addrs = []string{defaultAddr}
	}
	// One-shot commands send to the given nodes (which forward): learning
	// the ring first would cost a call, and the nodes' advertised addresses
	// may not be reachable from here (a port-forward, say).
	tcfg, err := lf.tls.config()
	if err != nil {
		return nil, err
	}
	return client.New(client.Config{Addrs: addrs, Timeout: lf.timeout, DisableRouting: true, TLS: tcfg})
}

// periodFlag parses periods with policy.ParseDuration (Go syntax plus days).
type periodFlag time.Duration

func (p *periodFlag) String() string { return time.Duration(*p).String() }

func (p *periodFlag) Set(s string) error {
	d, err := policy.ParseDuration(s)
	if err != nil {
		return err
	}
	*p = periodFlag(d)
	return nil
}

// parseInterleaved parses flags that may come before or after one
// positional argument, as in `sluice check KEY --limit 10`.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseWithEnv(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// keyCommand is a parsed `sluice check` or `sluice usage`: one KEY, the
// limit flags, and a client dialled to the given nodes.
type keyCommand struct {
	key    string
	flags  limitFlags
	limit  client.Limit
	client *client.Client
}

// parseKeyCommand parses a command that takes one KEY and the limit flags
// (extra adds the command's own flags) and dials the nodes. The caller
// closes kc.client.
func parseKeyCommand(name, usage string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*keyCommand, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	kc := &keyCommand{}
	kc.flags.register(fs)
	if extra != nil {
		extra(fs)
	}
	describeEnv(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 1 {
		return nil, fmt.Errorf("want exactly one KEY, got %d arguments", len(pos))
	}
	kc.key = pos[0]
	if kc.limit, err = kc.flags.clientLimit(); err != nil {
		return nil, err
	}
	if kc.client, err = kc.flags.dial(); err != nil {
		return nil, err
	}
	return kc, nil
}

// runCheck spends units; exit 0 allowed, 1 denied, 2 error.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cost *int64
	kc, err := parseKeyCommand("check", "Usage: sluice check [--addr HOST:PORT] KEY (--limit N --period D [--burst N] [--algorithm A] | --policy P) [--cost N] [--json]",
		args, stderr, func(fs *flag.FlagSet) { cost = fs.Int64("cost", 1, "units to spend") })
	if err != nil {
		return err
	}
	defer kc.client.Close()
	if *cost <= 0 {
		return errors.New("--cost: must be > 0 (use 'sluice usage' to read without spending)")
	}
	res, err := kc.client.Check(ctx, client.Item{Key: kc.key, Policy: kc.flags.policy, Limit: kc.limit, Cost: *cost})
	if err != nil {
		return unreachable(kc.flags.addr, err)
	}
	if err := printResult(stdout, kc.flags.asJSON, kc.key, res[0], false, resetPhrase(kc.flags.policy, kc.limit.Algorithm)); err != nil {
		return err
	}
	if res[0].Err != nil {
		return res[0].Err
	}
	if !res[0].Allowed {
		return errDenied
	}
	return nil
}

// runUsage reads usage without spending.
func runUsage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	kc, err := parseKeyCommand("usage", "Usage: sluice usage [--addr HOST:PORT] KEY (--limit N --period D | --policy P) [--json]",
		args, stderr, nil)
	if err != nil {
		return err
	}
	defer kc.client.Close()
	res, err := kc.client.Usage(ctx, kc.key, kc.flags.policy, kc.limit)
	if err != nil {
		return unreachable(kc.flags.addr, err)
	}
	if err := printResult(stdout, kc.flags.asJSON, kc.key, res, true, resetPhrase(kc.flags.policy, kc.limit.Algorithm)); err != nil {
		return err
	}
	return res.Err
}
