package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/procs"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// child is a server process this program started.
type child = procs.Proc

// children are all the processes started, so that every one is stopped on
// exit whatever path the program takes.
type children struct {
	mu   sync.Mutex
	list []*child
	dir  string // temp dir for logs and data
}

func newChildren() (*children, error) {
	dir, err := os.MkdirTemp("", "benchcompare-")
	if err != nil {
		return nil, err
	}
	return &children{dir: dir}, nil
}

// start runs a server process with its output in a log file in the temp
// dir (procs.Start).
func (cs *children) start(name string, path string, args ...string) (*child, error) {
	return cs.startEnv(name, nil, path, args...)
}

// startEnv is start with env added to this program's environment.
func (cs *children) startEnv(name string, env []string, path string, args ...string) (*child, error) {
	c, err := procs.Start(cs.dir, name, env, path, args...)
	if err != nil {
		return nil, err
	}
	cs.mu.Lock()
	cs.list = append(cs.list, c)
	cs.mu.Unlock()
	return c, nil
}

// stopAll stops every child (concurrently) and removes the temp dir.
func (cs *children) stopAll() {
	cs.mu.Lock()
	list := cs.list
	cs.list = nil
	cs.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range list {
		wg.Go(func() { c.Stop(5 * time.Second) })
	}
	wg.Wait()
	_ = os.RemoveAll(cs.dir)
}

// procCPU returns the CPU time (user + system) the process has used so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces:
	// fields are counted from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// selfCPU returns this process's CPU time (user + system), all threads.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procRSS returns VmRSS of the process in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					return 0, err
				}
				return kb * 1024, nil
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// sluiceNode is one `sluice serve` process.
type sluiceNode struct {
	*child
	grpc, http, gossip string
}

// startSluice starts n nodes; nodes after the first join the first. It
// waits until every node is ready and sees n members.
func startSluice(ctx context.Context, cs *children, bin string, n int, prefix string, env []string, extra ...string) ([]*sluiceNode, error) {
	ports, err := procs.FreePorts(4 * n)
	if err != nil {
		return nil, err
	}
	var nodes []*sluiceNode
	for i := range n {
		nd := &sluiceNode{grpc: procs.Loopback(ports[4*i]), http: procs.Loopback(ports[4*i+1]), gossip: procs.Loopback(ports[4*i+2])}
		name := fmt.Sprintf("%s%d", prefix, i+1)
		args := []string{"serve", "--node-name", name, "--grpc-addr", nd.grpc, "--http-addr", nd.http,
			"--peer-addr", procs.Loopback(ports[4*i+3]), "--gossip-addr", nd.gossip, "--log-level", "warn", "--shutdown-timeout", "3s",
			// On loopback, peers in plaintext, as docs/benchmarks.md measured them.
			"--insecure"}
		if i > 0 {
			args = append(args, "--join", nodes[0].gossip)
		}
		args = append(args, extra...)
		c, err := cs.startEnv(name, env, bin, args...)
		if err != nil {
			return nil, err
		}
		nd.child = c
		nodes = append(nodes, nd)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, nd := range nodes {
		if err := waitSluiceNode(ctx, nd, n, deadline); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// waitSluiceNode polls /readyz and Members until the node is ready and sees
// want members, or the deadline passes.
func waitSluiceNode(ctx context.Context, nd *sluiceNode, want int, deadline time.Time) error {
	cl, err := client.New(client.Config{Addrs: []string{nd.grpc}, Timeout: time.Second, DisableRouting: true})
	if err != nil {
		return err
	}
	defer cl.Close()
	hc := &http.Client{Timeout: time.Second}
	last := "not polled"
	for {
		if done, werr := nd.Exited(); done {
			return fmt.Errorf("%s exited (%v): %s", nd.Name, werr, nd.LogTail(8))
		}
		ready := false
		if resp, err := hc.Get("http://" + nd.http + "/readyz"); err != nil {
			last = err.Error()
		} else {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
			last = "readyz " + resp.Status
		}
		if ready {
			if _, ms, err := cl.Members(ctx); err != nil {
				last = err.Error()
			} else if len(ms) == want {
				return nil
			} else {
				last = fmt.Sprintf("%d of %d members", len(ms), want)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready with %d members before the deadline: %s; log: %s", nd.Name, want, last, nd.LogTail(8))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// commandOutput runs a short command and returns its trimmed output, or ""
// if it fails.
func commandOutput(name string, args ...string) string {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return ""
	}
	return strings.TrimSpace(out.String())
}
