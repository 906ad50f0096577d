package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// runMembers lists the cluster's members as one node sees them.
func runMembers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("members", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", defaultAddr, "gRPC address of a Sluice node")
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := fs.Duration("timeout", 2*time.Second, "call timeout")
	var tf tlsFlags
	tf.register(fs)
	describeEnv(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	tcfg, err := tf.config()
	if err != nil {
		return err
	}
	c, err := client.New(client.Config{Addrs: []string{*addr}, Timeout: *timeout, DisableRouting: true, TLS: tcfg})
	if err != nil {
		return err
	}
	defer c.Close()
	node, ms, err := c.Members(ctx)
	if err != nil {
		return unreachable([]string{*addr}, err)
	}
	mismatch := hashMismatch(node, ms, func(m client.Member) string { return m.PolicyHash })
	rlsMismatch := hashMismatch(node, ms, func(m client.Member) string { return m.RLSHash })
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			Node           string          `json:"node"`
			Members        []client.Member `json:"members"`
			PolicyMismatch []string        `json:"policy_mismatch,omitempty"`
			RLSMismatch    []string        `json:"rls_mismatch,omitempty"`
			Suspect        []string        `json:"suspect,omitempty"`
		}{node, ms, mismatch, rlsMismatch, suspects(ms)})
	}
	return printMembers(stdout, node, ms, mismatch, rlsMismatch)
}

// hashMismatch returns the names of the members whose hash (the policy
// or the RLS one, as of returns) differs from that of node (the member
// that answered). Members that advertise no hash (older versions), or a
// node that does not, are not compared.
func hashMismatch(node string, ms []client.Member, of func(client.Member) string) []string {
	var local string
	for _, m := range ms {
		if m.Name == node {
			local = of(m)
		}
	}
	var out []string
	for _, m := range ms {
		if h := of(m); local != "" && h != "" && h != local {
			out = append(out, m.Name)
		}
	}
	return out
}

// suspects returns the names of the members in state "suspect".
func suspects(ms []client.Member) []string {
	var out []string
	for _, m := range ms {
		if m.State == "suspect" {
			out = append(out, m.Name)
		}
	}
	return out
}

// printMembers prints the members as a table; the POLICY and RLS columns
// mark with "!=" the members whose policies or RLS configuration differ
// from node's. Lines after it name the mismatched and suspect members, if
// any.
func printMembers(w io.Writer, node string, ms []client.Member, mismatch, rlsMismatch []string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGRPC\tGOSSIP\tSTATE\tRING SHARE\tVERSION\tPOLICY\tRLS")
	cell := func(h, name string, mis []string) string {
		switch {
		case h == "":
			return "-"
		case slices.Contains(mis, name):
			return h + " != " + node
		}
		return h
	}
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\n", m.Name, m.GRPCAddr, m.GossipAddr, m.State, 100*m.RingShare, m.Version,
			cell(m.PolicyHash, m.Name, mismatch), cell(m.RLSHash, m.Name, rlsMismatch))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(mismatch) > 0 {
		if _, err := fmt.Fprintf(w, "policy mismatch: %d of %d members run policies unlike %s's: %s\n",
			len(mismatch), len(ms), node, strings.Join(mismatch, ", ")); err != nil {
			return err
		}
	}
	if len(rlsMismatch) > 0 {
		if _, err := fmt.Fprintf(w, "RLS config mismatch: %d of %d members run an Envoy RLS configuration unlike %s's: %s\n",
			len(rlsMismatch), len(ms), node, strings.Join(rlsMismatch, ", ")); err != nil {
			return err
		}
	}
	if sus := suspects(ms); len(sus) > 0 {
		_, err := fmt.Fprintf(w, "suspect: %d of %d members do not answer %s (its probes or calls): %s; %s answers their keys by their failure mode\n",
			len(sus), len(ms), node, strings.Join(sus, ", "), node)
		return err
	}
	return nil
}
