package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeCluster returns the `sluice serve` commands of the README's
// "A cluster" example, with the block's shell variables expanded.
func readmeCluster(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## A cluster\n")
	if !ok {
		t.Fatal(`README.md has no "## A cluster" section`)
	}
	_, block, ok := strings.Cut(sec, "```sh\n")
	if !ok {
		t.Fatal(`README.md's "A cluster" has no sh block`)
	}
	block, _, _ = strings.Cut(block, "```")
	vars := map[string]string{}
	assign := regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=(\S+)$`)
	var cmds [][]string
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSuffix(strings.TrimSpace(line), "&")
		if m := assign.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
			continue
		}
		line = os.Expand(line, func(k string) string { return vars[k] })
		if f := strings.Fields(line); len(f) > 1 && f[0] == "./bin/sluice" && f[1] == "serve" {
			cmds = append(cmds, f[2:])
		}
	}
	return cmds
}

func flagValue(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// Every node of the README's cluster gets the same --join list, naming
// every node's gossip address: a node restarted with its own command
// (the first one included) then rejoins the others instead of starting a
// cluster of its own.
func TestReadmeClusterJoinsAlike(t *testing.T) {
	cmds := readmeCluster(t)
	if len(cmds) < 2 {
		t.Fatalf("README's cluster example has %d serve commands, want several", len(cmds))
	}
	join := flagValue(cmds[0], "--join")
	seeds := strings.Split(join, ",")
	for i, c := range cmds {
		name := flagValue(c, "--node-name")
		if got := flagValue(c, "--join"); got != join {
			t.Errorf("node %d (%s): --join %q, want the same list as the first node's, %q", i, name, got, join)
		}
		if g := flagValue(c, "--gossip-addr"); !slices.Contains(seeds, g) {
			t.Errorf("node %d (%s): its --gossip-addr %q is not in the --join list %q", i, name, g, join)
		}
	}
}

// The README's point, with processes: b and c run with the common --join
// list; a, stopped (SIGTERM: it leaves, and the others forget it) and
// started again with that list, as the README's command does, rejoins them
// at once instead of serving as a cluster of its own.
func TestReadmeRestartedFirstNodeRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	seeds := strings.Join(g, ",")
	// a starts first and alone: with the list, it would not be ready
	// until b or c contacted it, and startServerNamed waits for /readyz.
	a := &proc{server: startServerNamed(t, "a", "--gossip-addr", g[0]), name: "a"}
	b := &proc{server: startServerNamed(t, "b", "--gossip-addr", g[1], "--join", seeds), name: "b"}
	c := &proc{server: startServerNamed(t, "c", "--gossip-addr", g[2], "--join", seeds), name: "c"}
	waitMembers(t, 10*time.Second, 3, a, b, c)

	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	waitMembers(t, 10*time.Second, 2, b, c)
	a = &proc{server: startServerNamed(t, "a", "--gossip-addr", a.gossip, "--join", seeds), name: "a"}
	took := waitMembers(t, 5*time.Second, 3, a, b, c)
	t.Logf("a, stopped and started again with the common --join list, lists 3 members after %s", took)
}

// docs/configuration.md's table lists every flag of `sluice serve`, and
// names no flag it does not have.
func TestConfigurationDocListsEveryServeFlag(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	row := regexp.MustCompile("^\\| `--[a-z0-9-]+`(, `--[a-z0-9-]+`)* \\|")
	for _, line := range strings.Split(string(b), "\n") {
		for _, f := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(row.FindString(line), -1) {
			documented[f[1]] = true
		}
	}
	var help bytes.Buffer
	_ = runServe(context.Background(), []string{"-h"}, &help, &help)
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(help.String(), -1) {
		flags[m[1]] = true
		if !documented[m[1]] {
			t.Errorf("--%s is a flag of `sluice serve` missing from docs/configuration.md's table", m[1])
		}
	}
	if len(flags) < 10 {
		t.Fatalf("`sluice serve -h` lists %d flags:\n%s", len(flags), help.String())
	}
	for f := range documented {
		if !flags[f] {
			t.Errorf("docs/configuration.md's table lists --%s, which `sluice serve -h` does not", f)
		}
	}
}
