package main

import (
	"context"
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

// proc is a server process this program started, its output in a log file.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
	once sync.Once
}

// startProc runs path with args and env added to this program's
// environment, in its own process group, killed if this program dies.
func startProc(dir, name string, env []string, path string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL after 5s, and waits.
func (p *proc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// logTail is the end of the process's output, for error messages.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitTCP waits until addr accepts connections, p exits, or timeout.
func waitTCP(ctx context.Context, p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			return fmt.Errorf("%s exited (%v): %s", p.name, p.err, p.logTail())
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not accepting connections: %v; log: %s", p.name, addr, err, p.logTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ensureRedis returns the path of redis-server, installing Debian's
// package if it is not on PATH (as cmd/benchcompare does).
func ensureRedis(ctx context.Context) (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	fmt.Fprintln(os.Stderr, "rlsref: redis-server not on PATH: apt-get install -y redis-server")
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

// startRedis runs a redis-server without persistence on a free port.
func startRedis(ctx context.Context, dir string) (*proc, string, error) {
	bin, err := ensureRedis(ctx)
	if err != nil {
		return nil, "", err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, "", err
	}
	addr := loopback(ports[0])
	p, err := startProc(dir, "redis", nil, bin, "--save", "", "--appendonly", "no",
		"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir)
	if err != nil {
		return nil, "", err
	}
	if err := waitTCP(ctx, p, addr, 15*time.Second); err != nil {
		p.stop()
		return nil, "", err
	}
	return p, addr, nil
}

// reference is a running envoyproxy/ratelimit.
type reference struct {
	*proc
	grpc string
}

// startReference runs the reference binary bin with the YAML files of
// configDir (one per domain) against the Redis at redisAddr, on free
// ports, with its own settings (src/settings/settings.go) given by
// environment: the files go to RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config,
// watched directly (RUNTIME_WATCH_ROOT=false) as in the reference's
// docker-compose example; statsd off, stats to its log.
func startReference(ctx context.Context, dir, name, bin, configDir, redisAddr string, extraEnv ...string) (*reference, error) {
	root := filepath.Join(dir, name+"-runtime")
	appDir := filepath.Join(root, "ratelimit", "config")
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(appDir, 0o755); err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(configDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(appDir, filepath.Base(f)), b, 0o644); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	env := []string{
		"RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false",
		"RUNTIME_IGNOREDOTFILES=true",
		"USE_STATSD=false",
		"LOG_LEVEL=warn",
		"BACKEND_TYPE=redis",
		"REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL=" + redisAddr,
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[1]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[2]),
	}
	env = append(env, extraEnv...)
	p, err := startProc(dir, name, env, bin)
	if err != nil {
		return nil, err
	}
	r := &reference{proc: p, grpc: loopback(ports[2])}
	if err := waitTCP(ctx, p, r.grpc, 30*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return r, nil
}
