package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluice-rl/sluice/internal/procs"
)

// proc is a server process this program started (internal/procs).
type proc = procs.Proc

// stopGrace is how long stop waits after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// prepare loads the cases of dir cases (only those named in only, if
// any) and starts a Redis in a new temp dir (named from pattern); done
// stops the Redis and removes the dir.
func prepare(ctx context.Context, cases string, only []string, pattern string) (tcs []*testCase, dir, redisAddr string, done func(), err error) {
	if tcs, err = loadCases(cases, only); err != nil {
		return nil, "", "", nil, err
	}
	if dir, err = os.MkdirTemp("", pattern); err != nil {
		return nil, "", "", nil, err
	}
	redis, redisAddr, err := startRedis(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", "", nil, err
	}
	return tcs, dir, redisAddr, func() {
		redis.Stop(stopGrace)
		os.RemoveAll(dir)
	}, nil
}

// startRedis runs a redis-server without persistence on a free port.
func startRedis(ctx context.Context, dir string) (*proc, string, error) {
	bin, err := procs.EnsureRedis(ctx, "rlsref")
	if err != nil {
		return nil, "", err
	}
	ports, err := procs.FreePorts(1)
	if err != nil {
		return nil, "", err
	}
	addr := procs.Loopback(ports[0])
	p, err := procs.Start(dir, "redis", nil, bin, procs.RedisArgs(ports[0], dir)...)
	if err != nil {
		return nil, "", err
	}
	if err := procs.WaitTCP(ctx, p, addr, 15*time.Second); err != nil {
		p.Stop(stopGrace)
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
	ports, err := procs.FreePorts(3)
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
	p, err := procs.Start(dir, name, env, bin)
	if err != nil {
		return nil, err
	}
	r := &reference{proc: p, grpc: procs.Loopback(ports[2])}
	if err := procs.WaitTCP(ctx, p, r.grpc, 30*time.Second); err != nil {
		p.Stop(stopGrace)
		return nil, err
	}
	return r, nil
}
