package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
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
	wait := fs.Int("wait", 0, "wait until the node lists at least this many alive members (its own start included), up to --wait-timeout; 0: answer at once")
	waitTimeout := fs.Duration("wait-timeout", 30*time.Second, "bound on --wait")
	var tf tlsFlags
	tf.register(fs)
	describeEnv(fs)
	if err := parseWithEnv(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *wait < 0 {
		return fmt.Errorf("--wait: %d, want 0 or more members", *wait)
	}
	if *waitTimeout <= 0 {
		return fmt.Errorf("--wait-timeout: %s, want more than 0", *waitTimeout)
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
	node, ms, err := membersWait(ctx, c, *wait, *waitTimeout)
	if err != nil {
		return unreachable([]string{*addr}, err)
	}
	if n := alive(ms); n < *wait {
		return fmt.Errorf("--wait %d: %s lists %d alive members after %s", *wait, node, n, *waitTimeout)
	}
	mismatch := hashMismatch(node, ms, func(m client.Member) string { return m.PolicyHash })
	rlsMismatch := hashMismatch(node, ms, func(m client.Member) string { return m.RLSHash })
	insecure, err := c.Insecure(ctx)
	if err != nil {
		return unreachable([]string{*addr}, err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			Node           string          `json:"node"`
			Members        []client.Member `json:"members"`
			PolicyMismatch []string        `json:"policy_mismatch,omitempty"`
			RLSMismatch    []string        `json:"rls_mismatch,omitempty"`
			Suspect        []string        `json:"suspect,omitempty"`
			Insecure       bool            `json:"insecure,omitempty"`
		}{node, ms, mismatch, rlsMismatch, suspects(ms), insecure})
	}
	if err := printMembers(stdout, node, ms, mismatch, rlsMismatch); err != nil || !insecure {
		return err
	}
	_, err = fmt.Fprintf(stdout, "insecure: %s runs its cluster without authentication (--insecure): anyone who reaches its peer and gossip ports can join, read and change counters; give every node the same --cluster-secret-file\n", node)
	return err
}

// membersWait asks the node for its members until it lists at least want
// alive ones (a node not answering yet is asked again) or timeout passes;
// it returns the last answer, or the last error if none came.
func membersWait(ctx context.Context, c *client.Client, want int, timeout time.Duration) (string, []client.Member, error) {
	node, ms, err := c.Members(ctx)
	if want == 0 {
		return node, ms, err
	}
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for (err != nil || alive(ms) < want) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return node, ms, ctx.Err()
		case <-tick.C:
		}
		var n string
		var m []client.Member
		if n, m, err = c.Members(ctx); err == nil {
			node, ms = n, m
		}
	}
	if ms != nil {
		err = nil
	}
	return node, ms, err
}

// alive counts the members in state "alive".
func alive(ms []client.Member) int {
	n := 0
	for _, m := range ms {
		if m.State == "alive" {
			n++
		}
	}
	return n
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
	fmt.Fprintln(tw, "NAME\tGRPC\tGOSSIP\tSTATE\tRING SHARE\tRAFT\tGROUP\tEPOCH\tVERSION\tPOLICY\tRLS")
	cell := func(h, name string, mis []string) string {
		switch {
		case h == "":
			return "-"
		case slices.Contains(mis, name):
			return h + " != " + node
		}
		return h
	}
	dash := func(s string) string { return cmp.Or(s, "-") }
	for _, m := range ms {
		epoch := "-"
		if m.Epoch > 0 {
			epoch = strconv.FormatUint(m.Epoch, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, m.GRPCAddr, m.GossipAddr, m.State, 100*m.RingShare,
			dash(m.RaftRole), dash(m.RaftGroup), epoch, m.Version, cell(m.PolicyHash, m.Name, mismatch), cell(m.RLSHash, m.Name, rlsMismatch))
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
