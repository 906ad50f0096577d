//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The faults of the randomized test (chaos_test.go), on a cluster's
// containers. Partitions between chosen nodes and delays are made in the
// containers' network namespaces from the host (nsenter, iptables, tc):
// the image is FROM scratch and has no tools of its own. `make chaos-tools`
// installs them where they are missing.

// pid returns the host PID of node n's container.
func (c *cluster) pid(t *testing.T, n *node) string {
	t.Helper()
	return mustDocker(t, "inspect", "-f", "{{.State.Pid}}", n.name)
}

// inNetns runs a command in node n's network namespace.
func (c *cluster) inNetns(t *testing.T, n *node, args ...string) (string, error) {
	t.Helper()
	return run("nsenter", append([]string{"-t", c.pid(t, n), "-n"}, args...)...)
}

// clusterIface returns the name of node n's interface on the cluster
// network (the one holding n.ip).
func (c *cluster) clusterIface(t *testing.T, n *node) string {
	t.Helper()
	out, err := c.inNetns(t, n, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		t.Fatalf("%s: ip addr: %v", n.short, err)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && strings.HasPrefix(f[3], n.ip+"/") {
			return strings.TrimSuffix(f[1], "@")
		}
	}
	t.Fatalf("%s: no interface with %s in %q", n.short, n.ip, out)
	return ""
}

// cut drops every packet between the nodes of side a and those of side b
// (both ways, in each a node's namespace), until heal.
func (c *cluster) cut(t *testing.T, a, b []*node) {
	t.Helper()
	for _, x := range a {
		for _, y := range b {
			for _, rule := range [][]string{{"INPUT", "-s", y.ip}, {"OUTPUT", "-d", y.ip}} {
				if out, err := c.inNetns(t, x, append([]string{"iptables", "-w", "-A"}, append(rule, "-j", "DROP")...)...); err != nil {
					t.Fatalf("%s: iptables %v: %v: %s", x.short, rule, err, out)
				}
			}
		}
	}
}

// heal removes the cuts and delays made in the namespaces of nodes.
func (c *cluster) heal(t *testing.T, nodes ...*node) {
	t.Helper()
	for _, n := range nodes {
		if out, err := c.inNetns(t, n, "iptables", "-w", "-F"); err != nil {
			t.Errorf("%s: iptables -F: %v: %s", n.short, err, out)
		}
		c.inNetns(t, n, "tc", "qdisc", "del", "dev", c.clusterIface(t, n), "root") // none is fine
	}
}

// slow delays every packet node n sends on the cluster network by d
// (tc netem), until heal, and says how. A kernel without netem (this
// workplace's VMs have none, nor modules to load) gets a token bucket
// filter instead: the node's cluster traffic is throttled to 256 kbit/s
// and queues for up to d, so its calls slow down under load.
func (c *cluster) slow(t *testing.T, n *node, d time.Duration) string {
	t.Helper()
	iface := c.clusterIface(t, n)
	ms := fmt.Sprintf("%dms", d.Milliseconds())
	out, err := c.inNetns(t, n, "tc", "qdisc", "add", "dev", iface, "root", "netem", "delay", ms)
	if err == nil {
		return "netem delay " + ms
	}
	if !strings.Contains(out, "unknown") {
		t.Fatalf("%s: tc netem: %v: %s", n.short, err, out)
	}
	if out, err := c.inNetns(t, n, "tc", "qdisc", "add", "dev", iface, "root", "tbf", "rate", "256kbit", "burst", "16kbit", "latency", ms); err != nil {
		t.Fatalf("%s: tc tbf: %v: %s", n.short, err, out)
	}
	return "tbf 256kbit, queue " + ms + " (no netem in this kernel)"
}

// removeNode deletes a stopped node's container and network, so that its
// index can be used again.
func (c *cluster) removeNode(t *testing.T, n *node) {
	t.Helper()
	if n.cli != nil {
		n.cli.Close()
	}
	c.saveLogs(n)
	mustDocker(t, "rm", "-f", n.name)
	mustDocker(t, "network", "rm", n.clientNet)
	delete(c.nodes, n.short)
}

// contextWithTimeout is a context that ends after d, or with the test.
func contextWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// run runs a host command, bounded to 30 s, and returns its trimmed
// output.
func run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
