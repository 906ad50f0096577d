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
	"syscall"
)

const usage = `Usage: rlsref record [flags]    record the goldens from envoyproxy/ratelimit + Redis
       rlsref live [flags]      the same cases against the reference and a live Sluice, side by side
       rlsref validate [flags]  record which configs the reference's config checker accepts

Run from the repository's root (make rls-record, make rls-conformance).`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "rlsref:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet("rlsref "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cases := fs.String("cases", "node/testdata/rls-conformance", "the directory of the cases")
	only := fs.String("only", "", "run only these cases, comma-separated")
	ratelimit := fs.String("ratelimit", "bin/ratelimit", "the reference binary (make rlsref)")
	switch args[0] {
	case "record":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		bin, err := binary(*ratelimit, "make rlsref")
		if err != nil {
			return err
		}
		return record(ctx, recordOptions{cases: *cases, only: splitList(*only), ratelimit: bin}, stderr)
	case "live":
		sluice := fs.String("sluice", "bin/sluice", "the sluice binary (make build)")
		nodes := fs.Int("nodes", 3, "Sluice nodes in the cluster; requests go to them in turn")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *nodes < 1 {
			return errors.New("--nodes: must be >= 1")
		}
		bin, err := binary(*ratelimit, "make rlsref")
		if err != nil {
			return err
		}
		sbin, err := binary(*sluice, "make build")
		if err != nil {
			return err
		}
		return live(ctx, liveOptions{cases: *cases, only: splitList(*only), ratelimit: bin, sluice: sbin, nodes: *nodes}, stdout, stderr)
	case "validate":
		fs.Lookup("cases").DefValue = "rls/testdata/reference-validation"
		_ = fs.Set("cases", "rls/testdata/reference-validation")
		checker := fs.String("config-check", "bin/ratelimit-config-check", "the reference's config checker (make rlsref)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		bin, err := binary(*checker, "make rlsref")
		if err != nil {
			return err
		}
		return validate(ctx, *cases, bin, splitList(*only), stderr)
	default:
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
}

// binary is path made absolute, or an error saying how to build it.
func binary(path, build string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("%s: %w (%s builds it)", path, err, build)
	}
	return abs, nil
}
