package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
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
