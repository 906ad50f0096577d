package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/sluice-rl/sluice/internal/plan"
	"github.com/sluice-rl/sluice/node"
)

// runPlan prints the capacity estimate of internal/plan for a cluster's
// load; it talks to no node.
func runPlan(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var in plan.Input
	fs.Var(numberFlag{&in.RPS}, "rps", "checks per second offered to the whole cluster, e.g. 100000 or 1e5 (required)")
	fs.Var(numberFlag{&in.Keys}, "keys", "distinct keys live at once in the whole cluster, e.g. 10000000 or 1e7 (required)")
	fs.IntVar(&in.Nodes, "nodes", 3, "nodes in the cluster")
	fs.IntVar(&in.Replicas, "replicas", 0, "copies of each key's state on its heirs, as `sluice serve --replicas` (default: as its auto, half the nodes rounded down, at most 3: 1 with 2 or 3 nodes, 0 on a single node)")
	fs.Float64Var(&in.RoutedShare, "routed-share", 0, "share of checks, 0 to 1, from the Go client, which sends each to its owner (never forwarded)")
	fs.Float64Var(&in.GrantShare, "grant-share", 0, "share of the other checks, 0 to 1, on keys hot enough for local token grants")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, f := range []string{"rps", "keys"} {
		if !set[f] {
			return fmt.Errorf("--%s is required", f)
		}
	}
	if !set["replicas"] {
		in.Replicas = node.AutoReplicas(in.Nodes) // sluice serve's default
	}
	e, err := plan.Compute(in)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	printPlan(stdout, e)
	return nil
}

// numberFlag is a float flag that reads plain decimal or e-notation
// numbers and says which it wanted.
type numberFlag struct{ v *float64 }

func (n numberFlag) String() string {
	if n.v == nil {
		return "0"
	}
	return strconv.FormatFloat(*n.v, 'g', -1, 64)
}

func (n numberFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("not a number: %q", s)
	}
	*n.v = v
	return nil
}

func printPlan(w io.Writer, e plan.Estimate) {
	in := e.Input
	count := func(v float64) string { return humanize.Comma(int64(math.Ceil(v))) }
	size := func(v float64) string {
		if v >= 1<<30 {
			return fmt.Sprintf("%.2f GiB", v/(1<<30))
		}
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	rate := func(v float64) string { return fmt.Sprintf("%.2f MB/s (%.1f Mbit/s)", v/1e6, v*8/1e6) }
	fmt.Fprintf(w, "Sluice capacity estimate: %s checks/s, %s keys, %d nodes, %d replicas",
		count(in.RPS), count(in.Keys), in.Nodes, in.Replicas)
	fmt.Fprintf(w, " (routed share %g, grant share %g)\n", in.RoutedShare, in.GrantShare)
	fmt.Fprintln(w, "Constants measured in docs/benchmarks.md; the formula is in docs/capacity.md.")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nper node")
	fmt.Fprintf(tw, "  keys\t%s\t= keys / nodes × (1 + replicas)\n", count(e.KeysPerNode))
	fmt.Fprintf(tw, "  memory (RSS)\t%s\t= %s + keys × %.1f B\n", size(e.MemoryBytes), size(plan.NodeBaseBytes), plan.NodeBytesPerKey)
	fmt.Fprintf(tw, "  store cap needed\t%s\t= keys × %.0f B (--store-max-bytes)\n", size(e.StoreBytes), plan.StoreEstimateBytesPerKey)
	fmt.Fprintf(tw, "  memory limit\t%s\t= the larger of the store cap / %.1f (its default share) and the RSS\n", size(e.MemoryLimitBytes), plan.StoreMemoryShare)
	fmt.Fprintf(tw, "  CPU\t%.2f cores\t= rps × %.1f µs + forwarded × %.1f µs, / nodes; busy time: leave headroom\n",
		e.CPUCores, plan.NodeCPUPerCheck*1e6, plan.ForwardCPUPerCheck*1e6)
	fmt.Fprintln(tw, "\nbetween nodes (the cluster's total, both directions)")
	fmt.Fprintf(tw, "  forwarded checks\t%s/s\t= rps × (1 - routed) × (N-1)/N × (1 - grant)\n", count(e.ForwardedPerSec))
	fmt.Fprintf(tw, "  forward traffic\t%s\t= forwarded × %d B\n", rate(e.NetworkBytesPerSec), plan.ForwardedCheckBytes)
	fmt.Fprintf(tw, "  grant RPCs\t%.1f/s\t= rps × (1 - routed) × (N-1)/N × grant × %g × 3/2\n", e.GrantRPCsPerSec, plan.GrantRPCsPerCheck)
	fmt.Fprintf(tw, "  grant traffic\t%s\t= grant RPCs × %d B\n", rate(e.GrantBytesPerSec), plan.GrantRPCBytes)
	tw.Flush()
}
