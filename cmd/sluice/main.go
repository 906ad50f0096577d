// Command sluice is the Sluice server and CLI: `sluice serve` runs a node;
// `sluice check`, `sluice usage`, `sluice rls` and `sluice version` talk to one;
// `sluice plan` estimates a cluster's capacity.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // the IANA zones of calendar limits, also in a FROM scratch image
)

// Exit codes of the check, usage and rls commands.
const (
	exitAllowed = 0
	exitDenied  = 1
	exitError   = 2
)

// errDenied makes a command exit with exitDenied.
var errDenied = errors.New("denied")

// errBenchFailed makes `sluice bench` exit with exitDenied (1): the run
// completed but too many of its checks failed.
var errBenchFailed = errors.New("too many errors")

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"serve", "run a Sluice node", runServe},
	{"check", "spend units of a key's limit (exit 0 allowed, 1 denied, 2 error)", runCheck},
	{"usage", "read a key's usage without spending", runUsage},
	{"rls", "send one Envoy RLS ShouldRateLimit (exit 0 OK, 1 over the limit, 2 error)", runRLS},
	{"members", "list the cluster's members as a node sees them", runMembers},
	{"inspect", "show a key's state on its owner (an admin identity only)", runInspect},
	{"reset", "set a key to full, or to --remaining, on its owner (an admin identity only)", runReset},
	{"bench", "drive load at nodes: checks/s, latency percentiles, accuracy audit", runBench},
	{"plan", "estimate a cluster's memory, CPU and network from its checks/s and keys", runPlan},
	{"version", "print the version", runVersion},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a subcommand and maps its error to an exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitError
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return exitAllowed
		case errors.Is(err, errDenied):
			return exitDenied
		case errors.Is(err, errBenchFailed):
			fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, err)
			return exitDenied
		case errors.Is(err, flag.ErrHelp):
			return 0
		default:
			fmt.Fprintf(stderr, "sluice %s: %v\n", c.name, err)
			return exitError
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: sluice <command> [flags]\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'sluice <command> -h' for a command's flags.")
}
