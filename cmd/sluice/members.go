package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			Node    string          `json:"node"`
			Members []client.Member `json:"members"`
		}{node, ms})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tGRPC\tGOSSIP\tSTATE\tRING SHARE\tVERSION")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%s\n", m.Name, m.GRPCAddr, m.GossipAddr, m.State, 100*m.RingShare, m.Version)
	}
	return tw.Flush()
}
