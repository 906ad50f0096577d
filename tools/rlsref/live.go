package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/sluice-rl/sluice/internal/procs"
)

// liveOptions are live's flags.
type liveOptions struct {
	cases     string
	only      []string
	ratelimit string
	sluice    string
	nodes     int
}

// sluiceNode is one `sluice serve` process.
type sluiceNode struct {
	*proc
	grpc, http, gossip string
}

// startSluice starts n nodes serving configDir's RLS config; nodes after
// the first join it. It returns once every node answers ShouldRateLimit
// and sees n members.
func startSluice(ctx context.Context, dir, bin, configDir string, n int) ([]*sluiceNode, []*rlsClient, error) {
	ports, err := procs.FreePorts(4 * n)
	if err != nil {
		return nil, nil, err
	}
	var nodes []*sluiceNode
	var clients []*rlsClient
	fail := func(err error) ([]*sluiceNode, []*rlsClient, error) {
		stopSluice(nodes, clients)
		return nil, nil, err
	}
	for i := range n {
		nd := &sluiceNode{grpc: procs.Loopback(ports[4*i]), http: procs.Loopback(ports[4*i+1]), gossip: procs.Loopback(ports[4*i+2])}
		name := fmt.Sprintf("sluice-%d", i+1)
		args := []string{"serve", "--node-name", name, "--grpc-addr", nd.grpc, "--http-addr", nd.http,
			"--peer-addr", procs.Loopback(ports[4*i+3]), "--gossip-addr", nd.gossip, "--log-level", "warn", "--shutdown-timeout", "2s", "--rls-config", configDir,
			"--insecure"} // on loopback, peers in plaintext, as the recorded runs had them
		if i > 0 {
			args = append(args, "--join", nodes[0].gossip)
		}
		p, err := procs.Start(dir, name, nil, bin, args...)
		if err != nil {
			return fail(err)
		}
		nd.proc = p
		nodes = append(nodes, nd)
		c, err := dialRLS(nd.grpc)
		if err != nil {
			return fail(err)
		}
		clients = append(clients, c)
	}
	for i, nd := range nodes {
		if err := procs.WaitTCP(ctx, nd.proc, nd.grpc, 30*time.Second); err != nil {
			return fail(err)
		}
		if err := waitRLS(ctx, clients[i], 30*time.Second); err != nil {
			return fail(fmt.Errorf("%s: %w; log: %s", nd.Name, err, nd.LogTail(10)))
		}
		if err := waitMembers(ctx, bin, nd, n, 30*time.Second); err != nil {
			return fail(err)
		}
	}
	return nodes, clients, nil
}

func stopSluice(nodes []*sluiceNode, clients []*rlsClient) {
	for _, c := range clients {
		c.Close()
	}
	for _, nd := range nodes {
		nd.Stop(stopGrace)
	}
}

// waitMembers polls `sluice members --json` until the node sees want
// members.
func waitMembers(ctx context.Context, bin string, nd *sluiceNode, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		out, err := exec.CommandContext(ctx, bin, "members", "--addr", nd.grpc, "--json").Output()
		var m struct {
			Members []json.RawMessage `json:"members"`
		}
		switch {
		case err != nil:
			last = err.Error()
		case json.Unmarshal(out, &m) != nil:
			last = "unreadable: " + string(out)
		case len(m.Members) == want:
			return nil
		default:
			last = fmt.Sprintf("%d of %d members", len(m.Members), want)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s; log: %s", nd.Name, last, nd.LogTail(10))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// live runs every case against the reference and Sluice side by side and
// reports each answer that differs.
func live(ctx context.Context, o liveOptions, stdout, stderr io.Writer) error {
	cases, dir, redisAddr, done, err := prepare(ctx, o.cases, o.only, "rlsref-live-")
	if err != nil {
		return err
	}
	defer done()
	fmt.Fprintf(stdout, "reference: %s, %s; Sluice: %s, %d node(s)\n", referenceVersion(o.ratelimit), redisServerVersion(), o.sluice, o.nodes)
	var failed, steps, diffs int
	for _, tc := range cases {
		d, err := liveCase(ctx, dir, o, redisAddr, tc, stdout)
		if err != nil {
			return fmt.Errorf("%s: %w", tc.Name, err)
		}
		steps += len(tc.Requests)
		diffs += d
		if d > 0 {
			failed++
		}
	}
	fmt.Fprintf(stdout, "\n%d cases, %d steps: %d cases differ (%d steps)\n", len(cases), steps, failed, diffs)
	if failed > 0 {
		return fmt.Errorf("%d of %d cases differ from the reference", failed, len(cases))
	}
	return nil
}

// liveCase runs one case on a fresh reference and a fresh Sluice cluster
// and prints its differences; it returns their number.
func liveCase(ctx context.Context, dir string, o liveOptions, redisAddr string, tc *testCase, stdout io.Writer) (int, error) {
	ref, err := startReference(ctx, dir, "ratelimit-"+tc.Name, o.ratelimit, tc.ConfigDir, redisAddr)
	if err != nil {
		return 0, err
	}
	defer ref.Stop(stopGrace)
	rc, err := dialRLS(ref.grpc)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if err := waitRLS(ctx, rc, 30*time.Second); err != nil {
		return 0, fmt.Errorf("reference: %w; log: %s", err, ref.LogTail(10))
	}
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if err := flushAll(redisAddr); err != nil {
			return 0, err
		}
		nodes, clients, err := startSluice(ctx, dir, o.sluice, tc.ConfigDir, o.nodes)
		if err != nil {
			return 0, fmt.Errorf("sluice: %w", err)
		}
		got := make([]answer, len(tc.Requests))
		want, err := runSteps(ctx, tc, func(i int) answer {
			a := rc.call(ctx, tc.Requests[i])
			got[i] = clients[i%len(clients)].call(ctx, tc.Requests[i])
			a.Received = got[i].Received // the step's second must hold both calls
			return a
		})
		stopSluice(nodes, clients)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "rlsref: %s: attempt %d: %v; again on an empty Redis and a new cluster\n", tc.Name, attempt, err)
			continue
		}
		diffs, known := 0, 0
		for i := range want {
			if want[i].same(got[i]) {
				continue
			}
			if pin, ok := tc.Pins[i]; ok && pin.sameButReset(got[i]) {
				known++
				fmt.Fprintf(stdout, "known %s step %d: reference %s; sluice %s (pinned in %s/divergences.json)\n",
					tc.Name, i, want[i], got[i], tc.Name)
				continue
			}
			if diffs == 0 {
				fmt.Fprintf(stdout, "DIFF %s (%s)\n", tc.Name, tc.File.Semantics)
			}
			diffs++
			req, _ := protoJSON(tc.Requests[i])
			fmt.Fprintf(stdout, "  step %d at unix %d: %s\n    request:   %s\n    reference: %s\n    sluice:    %s\n",
				i, want[i].Sent.Unix(), tc.File.Steps[i].Note, req, want[i], got[i])
		}
		if diffs == 0 {
			fmt.Fprintf(stdout, "ok   %s (%d steps, %d known divergences)\n", tc.Name, len(want), known)
		}
		return diffs, nil
	}
	return 0, fmt.Errorf("no run of %d kept every step in its second", maxAttempts)
}
