package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/wire"
)

// `sluice inspect KEY` and `sluice reset KEY`: the admin calls
// (sluice.v1.Admin). The node must know the caller as an admin: by its
// client certificate (--tls-cert-file, a name in the node's --admin-names)
// or by a token of the node's --admin-token-file, which this command reads
// from its own --admin-token-file (the same file will do: its first token
// is sent).

// adminCommand is a parsed inspect or reset.
type adminCommand struct {
	key       string
	flags     limitFlags
	tokenFile string
	remaining int64
	limit     client.Limit
}

// parseAdminCommand parses an admin command's arguments; reset adds
// --remaining.
func parseAdminCommand(name, usage string, args []string, stderr io.Writer, reset bool) (*adminCommand, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	ac := &adminCommand{remaining: client.ResetFull}
	ac.flags.register(fs)
	fs.StringVar(&ac.tokenFile, "admin-token-file", "", "file whose first token (a line of the node's --admin-token-file) is sent as the admin bearer token (default: none; a client certificate the node lists in --admin-names will do)")
	if reset {
		fs.Int64Var(&ac.remaining, "remaining", client.ResetFull, "units left after the reset, 0 to the limit's capacity (default: full)")
	}
	describeEnv(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 1 {
		return nil, fmt.Errorf("want exactly one KEY, got %d arguments", len(pos))
	}
	ac.key = pos[0]
	if ac.key == "" {
		return nil, errors.New("KEY: must not be empty")
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if ac.flags.policy != "" {
		for _, f := range []string{"limit", "period", "burst", "algorithm"} {
			if given[f] {
				return nil, fmt.Errorf("--%s: give either --policy or an inline limit (--limit, --period, ...), not both", f)
			}
		}
	}
	if reset && given["remaining"] && ac.remaining < 0 {
		return nil, fmt.Errorf("--remaining: %d: must be >= 0 (omit it for full)", ac.remaining)
	}
	if ac.limit, err = ac.flags.clientLimit(); err != nil {
		return nil, err
	}
	return ac, nil
}

// dial connects to the nodes with the admin token, if any.
func (ac *adminCommand) dial() (*client.Client, error) {
	addrs := []string(ac.flags.addr)
	if len(addrs) == 0 {
		addrs = []string{defaultAddr}
	}
	tcfg, err := ac.flags.tls.config()
	if err != nil {
		return nil, err
	}
	var token string
	if ac.tokenFile != "" {
		if token, err = readAdminToken(ac.tokenFile); err != nil {
			return nil, fmt.Errorf("--admin-token-file: %w", err)
		}
	}
	return client.New(client.Config{Addrs: addrs, Timeout: ac.flags.timeout, DisableRouting: true, TLS: tcfg, AdminToken: token})
}

// readAdminToken returns the first token of a token file: its first line
// that is neither blank nor a '#' comment.
func readAdminToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("%s: no token in it", path)
}

// runInspect prints a key's state on its owner.
func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ac, err := parseAdminCommand("inspect", "Usage: sluice inspect [--addr HOST:PORT] KEY (--limit N --period D [--burst N] [--algorithm A] | --policy P) [--admin-token-file F] [--json]",
		args, stderr, false)
	if err != nil {
		return err
	}
	c, err := ac.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	info, err := c.Inspect(ctx, ac.key, ac.flags.policy, ac.limit)
	if err != nil {
		return unreachable(ac.flags.addr, err)
	}
	return printKeyInfo(stdout, ac.flags.asJSON, &info)
}

// runReset sets a key to full, or to --remaining, on its owner.
func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ac, err := parseAdminCommand("reset", "Usage: sluice reset [--addr HOST:PORT] KEY (--limit N --period D [--burst N] [--algorithm A] | --policy P) [--remaining N] [--admin-token-file F] [--json]",
		args, stderr, true)
	if err != nil {
		return err
	}
	c, err := ac.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	info, err := c.Reset(ctx, ac.key, ac.flags.policy, ac.limit, ac.remaining)
	if err != nil {
		return unreachable(ac.flags.addr, err)
	}
	return printKeyInfo(stdout, ac.flags.asJSON, &info)
}

// algorithmName is an algorithm's snake_case name.
func algorithmName(a client.Algorithm) string {
	return strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_"))
}

func printKeyInfo(w io.Writer, asJSON bool, k *client.KeyInfo) error {
	j := wire.KeyInfoJSON{Key: k.Key, Owner: k.Owner, Policy: k.Policy, Algorithm: algorithmName(k.Algorithm), Limit: k.Limit,
		Remaining: k.Remaining, Used: max(k.Limit-k.Remaining, 0), ResetAfter: k.ResetAfter.String(), Exists: k.Exists,
		Grants: k.Grants, GrantedTokens: k.GrantedTokens, LeaseCount: k.LeaseCount,
		Reservations: k.Reservations, ReservedUnits: k.ReservedUnits, DebtUnits: k.DebtUnits}
	if !k.ResetAt.IsZero() {
		j.ResetAt = k.ResetAt.UTC().Format(time.RFC3339)
	}
	if !k.WindowStart.IsZero() {
		j.WindowStart = k.WindowStart.UTC().Format(time.RFC3339)
	}
	for _, le := range k.Leases {
		j.Leases = append(j.Leases, wire.LeaseInfoJSON{Cost: le.Cost, ExpiresAfter: le.ExpiresAfter.String(), Bound: le.Bound})
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(&j)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "key %q owner %s algorithm %s", j.Key, j.Owner, j.Algorithm)
	if j.Policy != "" {
		fmt.Fprintf(&b, " policy %s", j.Policy)
	}
	fmt.Fprintf(&b, "\nremaining %d of %d (used %d), full in %s", j.Remaining, j.Limit, j.Used, j.ResetAfter)
	if j.ResetAt != "" {
		fmt.Fprintf(&b, " (at %s)", j.ResetAt)
	}
	if j.WindowStart != "" {
		fmt.Fprintf(&b, "\nwindow started %s", j.WindowStart)
	}
	if !j.Exists {
		b.WriteString("\nno state held (full or unused)")
	}
	if j.Grants > 0 {
		fmt.Fprintf(&b, "\ngrants out: %d (%d tokens)", j.Grants, j.GrantedTokens)
	}
	if j.Reservations > 0 {
		fmt.Fprintf(&b, "\nreservations unsettled: %d (%d units)", j.Reservations, j.ReservedUnits)
	}
	if j.DebtUnits > 0 {
		fmt.Fprintf(&b, "\nin debt: %d units below empty", j.DebtUnits)
	}
	if j.LeaseCount > 0 {
		fmt.Fprintf(&b, "\nleases: %d", j.LeaseCount)
		for _, le := range j.Leases {
			fmt.Fprintf(&b, "\n  cost %d, expires in %s, bound %t", le.Cost, le.ExpiresAfter, le.Bound)
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
