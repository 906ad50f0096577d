package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The run kinds of shell blocks (docshell_test.go), run with bash in a
// directory of the doc's own where ./bin/sluice and sluice (on PATH) are
// the binary built from this tree:
//
//   - run: against the doc's node, a `sluice serve` named node-a that the
//     test starts at the doc's first run block (with the block's node
//     flags; a flag's value that is a file of the tree is given as its
//     path) and keeps for the doc's later run blocks;
//   - run-alone: the block starts what it needs (its & processes are
//     killed after it); the doc's node, if started, is stopped first, as
//     the doc tells a reader to stop make run's node before it.
//
// No fixed port is bound: each port a block names (:8080, localhost:8081,
// 127.0.0.1:7946, 4 or 5 digits) is rewritten to one picked free, the
// same in all the doc's blocks; the node's HTTP and gRPC ports are those
// of 8080 and 8081, and SLUICE_ADDR points the CLI's default --addr
// (127.0.0.1:8081) at the node. A block without "$ " lines runs as one
// script under bash -e -o pipefail and must exit 0. In a console block
// ("$ " before each command) each command runs on its own and the lines
// shown after it must appear in its output (stdout and stderr), in order,
// other lines between them allowed (headers such as Date), durations
// (30s, 600ms) compared as any duration.
func TestDocShellBlocksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to run the docs' shell blocks")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the docs' shell blocks (apt-get install curl)")
	}
	blocks, _ := docShellBlocks(t) // TestDocShellBlocks reports their problems
	byDoc := map[string][]shellBlock{}
	var docs []string
	for _, b := range blocks {
		if b.kind == "check-only" {
			continue
		}
		if byDoc[b.file] == nil {
			docs = append(docs, b.file)
		}
		byDoc[b.file] = append(byDoc[b.file], b)
	}
	if len(docs) == 0 {
		t.Fatal("no run blocks")
	}
	for _, doc := range docs {
		t.Run(doc, func(t *testing.T) {
			t.Parallel()
			d := &docRun{t: t, dir: t.TempDir(), ports: map[string]string{}}
			if err := os.Mkdir(filepath.Join(d.dir, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(sluiceBin, filepath.Join(d.dir, "bin", "sluice")); err != nil {
				t.Fatal(err)
			}
			for _, b := range byDoc[doc] {
				start := time.Now()
				d.run(b)
				t.Logf("%s (%s): %s", b, b.kind, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// docRun runs one doc's blocks in order.
type docRun struct {
	t     *testing.T
	dir   string
	ports map[string]string // a doc's port -> the one used
	node  *server
}

var docPort = regexp.MustCompile(`(^|[\s,=]|localhost|127\.0\.0\.1|0\.0\.0\.0):(\d{4,5})\b`)

// rewrite replaces the ports a block names with free ones.
func (d *docRun) rewrite(text string) string {
	return docPort.ReplaceAllStringFunc(text, func(s string) string {
		m := docPort.FindStringSubmatch(s)
		p, ok := d.ports[m[2]]
		if !ok {
			_, p, _ = net.SplitHostPort(freeAddr(d.t))
			d.ports[m[2]] = p
		}
		return m[1] + ":" + p
	})
}

// startNode starts the doc's node at its first run block.
func (d *docRun) startNode(b shellBlock) {
	t := d.t
	args := []string{"--gossip-addr", "127.0.0.1:0"}
	for _, a := range b.node {
		if _, err := os.Stat(filepath.Join("../..", a)); err == nil && !strings.HasPrefix(a, "-") {
			a, _ = filepath.Abs(filepath.Join("../..", a))
		}
		args = append(args, a)
	}
	d.node = startServerNamed(t, "node-a", args...)
	_, d.ports["8080"], _ = net.SplitHostPort(d.node.http)
	_, d.ports["8081"], _ = net.SplitHostPort(d.node.grpc)
}

func (d *docRun) env() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "SLUICE_") && !strings.HasPrefix(e, "PATH=") {
			env = append(env, e)
		}
	}
	return append(env, "PATH="+filepath.Join(d.dir, "bin")+":"+os.Getenv("PATH"),
		"SLUICE_ADDR=127.0.0.1:"+d.ports["8081"])
}

func (d *docRun) run(b shellBlock) {
	t := d.t
	switch {
	case b.kind == "run" && d.node == nil:
		d.startNode(b)
	case b.kind == "run-alone" && d.node != nil:
		_ = d.node.cmd.Process.Kill()
		<-d.node.exited
		d.node = nil
	}
	if _, ok := d.ports["8081"]; !ok {
		d.rewrite(":8081") // the CLI's default --addr, also of a run-alone block
	}
	if !strings.HasPrefix(b.text, "$ ") {
		for attempt := 1; ; attempt++ {
			script := d.rewrite(b.text)
			out, err := d.bash(script, "-e", "-o", "pipefail")
			if err != nil && b.kind == "run-alone" && attempt < 3 && strings.Contains(out, "address already in use") {
				// A port picked free was taken before the block bound
				// it: again, on other ports.
				t.Logf("%s: a port was taken before the block bound it; again on other ports", b)
				d.ports = map[string]string{}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v\nscript:\n%s\noutput:\n%s", b, err, script, out)
			}
			return
		}
	}
	for _, step := range consoleSteps(b.text) {
		cmd := d.rewrite(step.cmd)
		out, err := d.bash(cmd, "-o", "pipefail")
		if missing := missingLines(step.want, out); missing != "" {
			t.Errorf("%s: $ %s\n(%v) printed:\n%s\nwithout the doc's line %q (durations aside)", b, cmd, err, out, missing)
		}
	}
}

// bash runs script in its own process group, killed when it ends (its &
// processes too), with the output of all of them.
func (d *docRun) bash(script string, opts ...string) (string, error) {
	t := d.t
	outFile := filepath.Join(d.dir, "output")
	out, err := os.Create(outFile) // a file, not a pipe: & processes keep it open
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append(opts, "-c", script)...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = d.dir, d.env(), out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	if cmd.Process != nil {
		pg := cmd.Process.Pid
		_ = syscall.Kill(-pg, syscall.SIGKILL)
		for deadline := time.Now().Add(10 * time.Second); !errors.Is(syscall.Kill(-pg, 0), syscall.ESRCH); {
			if time.Now().After(deadline) {
				t.Fatalf("the processes of a block still run 10 s after SIGKILL")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if ctx.Err() != nil {
		runErr = fmt.Errorf("%w after 45 s", ctx.Err())
	}
	b, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), runErr
}

var anyDuration = regexp.MustCompile(`\b\d+(\.\d+)?(ns|us|µs|ms|s|m|h)\b`)

// missingLines returns the first of want's non-empty lines not found in
// out after the ones before it, or "".
func missingLines(want []string, out string) string {
	norm := func(s string) string {
		return anyDuration.ReplaceAllString(strings.TrimSpace(strings.TrimSuffix(s, "\r")), "DURATION")
	}
	got := strings.Split(out, "\n")
	i := 0
	for _, w := range want {
		if strings.TrimSpace(w) == "" {
			continue
		}
		for i < len(got) && norm(got[i]) != norm(w) {
			i++
		}
		if i == len(got) {
			return w
		}
		i++
	}
	return ""
}
