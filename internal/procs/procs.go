// Package procs runs the server processes of the benchmark and
// conformance tools (cmd/benchcompare, tools/rlsref): a process in its own
// process group with its output in a log file, stopped with SIGTERM then
// SIGKILL; free loopback ports; waiting for a port to accept connections;
// redis-server, installed from Debian's package when missing; and the
// module versions a Go binary was built with.
package procs

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a server process that Start started. Stop kills it and waits
// for it; it is safe to call more than once.
type Proc struct {
	// Name names the process in errors and its log file.
	Name string
	// Log is the file holding its stdout and stderr.
	Log string

	cmd      *exec.Cmd
	done     chan struct{}
	err      error // from Wait, once done is closed
	stopOnce sync.Once
}

// Start runs path with args, env added to this program's environment, and
// its output in dir/name.log. It is in its own process group (a
// terminal's Ctrl-C reaches only this program, which then stops it) and
// dies with this program's thread if this program is killed.
func Start(dir, name string, env []string, path string, args ...string) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL, and waits.
func (p *Proc) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
		_ = p.cmd.Process.Kill()
		<-p.done
	})
}

// LogTail returns the last n lines of the process's output, for error
// messages.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1.
func FreePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Loopback is 127.0.0.1:port.
func Loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// WaitTCP waits until addr accepts connections, p exits, or timeout
// passes.
func WaitTCP(ctx context.Context, p *Proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if done, werr := p.Exited(); done {
			return fmt.Errorf("%s exited (%v): %s", p.Name, werr, p.LogTail(10))
		}
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not accepting connections: %v; log: %s", p.Name, addr, err, p.LogTail(10))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// EnsureRedis returns the path of redis-server, installing Debian's
// package if it is not on PATH; prog names the caller in the notice.
func EnsureRedis(ctx context.Context, prog string) (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	fmt.Fprintf(os.Stderr, "%s: redis-server not on PATH: apt-get install -y redis-server\n", prog)
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	if err := apt("install", "-y", "redis-server"); err != nil {
		if err := apt("update"); err != nil {
			return "", fmt.Errorf("apt-get update: %w", err)
		}
		if err := apt("install", "-y", "redis-server"); err != nil {
			return "", fmt.Errorf("apt-get install redis-server: %w", err)
		}
	}
	return exec.LookPath("redis-server")
}

// ModuleVersion is the version of module in the Go binary bin, from its
// build information (its main module or a dependency), or "" if bin has
// no build information or does not hold module.
func ModuleVersion(bin, module string) string {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return ""
	}
	if bi.Main.Path == module {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == module {
			return d.Version
		}
	}
	return ""
}

// RedisArgs are redis-server's arguments for a server without persistence
// on 127.0.0.1:port, its working directory dir.
func RedisArgs(port int, dir string) []string {
	return []string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir}
}
