package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/bench"
	"github.com/sluice-rl/sluice/internal/procs"
)

// The RLS scenarios (f, g): every descriptor {key: <bench key>} in domain
// "bench" is limited to limitN per second, a fixed window, in both
// Sluice's --rls-config and envoyproxy/ratelimit's runtime directory.
const (
	rlsDomain = "bench"
	rlsKey    = "key"
	// rlsConns is the gRPC connections the load generator opens to each
	// system: one per Sluice node, the same number to the one
	// envoyproxy/ratelimit.
	rlsConns = 3
	// refModule is envoyproxy/ratelimit's module path.
	refModule = "github.com/envoyproxy/ratelimit"
)

// refEnv is envoyproxy/ratelimit's configuration (src/settings/settings.go)
// besides its ports, Redis address and config directory: its defaults,
// but for no statsd sink (stats go to its log), warnings only in the log,
// and a Redis pool as large as the most callers of a scenario (the
// default, 10, would queue 64 callers on its connections).
var refEnv = []string{"USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_POOL_SIZE=64"}

func rlsConfigYAML() string {
	return bench.RLSConfigYAML(bench.RLSConfig{Domain: rlsDomain, Key: rlsKey}, limitN, "second")
}

// writeRLSConfig writes the RLS config file Sluice's nodes load.
func (r *runner) writeRLSConfig() (string, error) {
	path := filepath.Join(r.cs.dir, "rls-bench.yaml")
	return path, os.WriteFile(path, []byte(rlsConfigYAML()), 0o644)
}

// startReference starts envoyproxy/ratelimit on the Redis of startRedis,
// with the RLS config in its runtime directory
// (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, watched directly as in its
// docker-compose example).
func (r *runner) startReference(ctx context.Context) {
	fail := func(err error) {
		r.refErr = err
		r.logf("envoyproxy/ratelimit: %v", err)
	}
	switch {
	case r.redisErr != nil:
		fail(fmt.Errorf("no redis: %w", r.redisErr))
		return
	case r.redis == nil:
		fail(fmt.Errorf("no redis"))
		return
	}
	if _, err := os.Stat(r.o.ratelimitBin); err != nil {
		fail(fmt.Errorf("%w (make rlsref builds it)", err))
		return
	}
	root := filepath.Join(r.cs.dir, "ratelimit-runtime")
	appDir := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(appDir, 0o755); err != nil {
		fail(err)
		return
	}
	if err := os.WriteFile(filepath.Join(appDir, "bench.yaml"), []byte(rlsConfigYAML()), 0o644); err != nil {
		fail(err)
		return
	}
	ports, err := procs.FreePorts(3)
	if err != nil {
		fail(err)
		return
	}
	r.refAddr = procs.Loopback(ports[2])
	env := append([]string{
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config",
		"RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + r.redisAddr,
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[1]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[2]),
	}, refEnv...)
	r.logf("starting envoyproxy/ratelimit on %s (redis %s)", r.refAddr, r.redisAddr)
	c, err := r.cs.startEnv("ratelimit", env, r.o.ratelimitBin)
	if err == nil {
		err = procs.WaitTCP(ctx, c, r.refAddr, 30*time.Second)
	}
	if err != nil {
		fail(err)
		return
	}
	r.ref = c
}

// newRLSTarget is the RLS Target of sys: the Sluice nodes in turn, or
// envoyproxy/ratelimit after emptying its Redis.
func (r *runner) newRLSTarget(ctx context.Context, sys string) (bench.Target, error) {
	cfg := bench.RLSConfig{Domain: rlsDomain, Key: rlsKey, Conns: rlsConns}
	switch sys {
	case "sluice":
		for _, n := range r.sluice {
			cfg.Addrs = append(cfg.Addrs, n.grpc)
		}
	case "sluice-owner":
		return r.newOwnerRLSTarget(cfg)
	case "sluice1":
		cfg.Addrs = []string{r.sluice1.grpc}
	case "echo":
		cfg.Addrs = []string{r.echoAddr}
	case "ratelimit":
		rdb := redis.NewClient(&redis.Options{Addr: r.redisAddr, DisableIdentity: true})
		err := rdb.FlushAll(ctx).Err()
		rdb.Close()
		if err != nil {
			return nil, fmt.Errorf("redis: flushall: %w", err)
		}
		cfg.Addrs = []string{r.refAddr}
	default:
		return nil, fmt.Errorf("system %q has no RLS target", sys)
	}
	return bench.NewRLSTarget(cfg)
}

// referenceVersion is envoyproxy/ratelimit's module version, from the
// binary's build information ("" without it).
func referenceVersion(bin string) string {
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	if v := procs.ModuleVersion(bin, refModule); v != "" {
		return refModule + " " + v
	}
	return refModule
}

// rlsScenarios reports whether the report has RLS scenarios, and others.
func (rep *Report) rlsScenarios() (rls, other bool) {
	for _, s := range rep.Scenarios {
		if s.RLS {
			rls = true
		} else {
			other = true
		}
	}
	return rls, other
}

// only is a copy of the report with the scenarios keep selects (for the
// sections and plots of each kind).
func (rep *Report) only(keep func(ScenarioInfo) bool) *Report {
	cp := *rep
	cp.Scenarios = nil
	for _, s := range rep.Scenarios {
		if keep(s) {
			cp.Scenarios = append(cp.Scenarios, s)
		}
	}
	var systems []string
	for _, sys := range rep.Systems {
		for _, s := range cp.Scenarios {
			if (scenario{RLS: s.RLS}).runs(sys) {
				systems = append(systems, sys)
				break
			}
		}
	}
	cp.Systems = systems
	return &cp
}

func isRLS(s ScenarioInfo) bool    { return s.RLS }
func isNotRLS(s ScenarioInfo) bool { return !s.RLS }

// refEnvText is refEnv for the report.
func refEnvText() string { return strings.Join(refEnv, " ") }

// ownerRLSTarget is the RLS target of sluice-owner, with the client whose
// ring places its calls.
type ownerRLSTarget struct {
	bench.Target
	c *client.Client
}

func (t ownerRLSTarget) Close() error { return errors.Join(t.Target.Close(), t.c.Close()) }

// newOwnerRLSTarget is the RLS target that sends each call to the owner of
// its descriptor: a routing Go client learns the 3 nodes' ring, and
// bench.SluiceRLSOwner names each counter's owner.
func (r *runner) newOwnerRLSTarget(cfg bench.RLSConfig) (bench.Target, error) {
	var addrs []string
	for _, n := range r.sluice {
		addrs = append(addrs, n.grpc)
	}
	c, err := client.New(client.Config{Addrs: addrs, Timeout: callTimeout})
	if err != nil {
		return nil, err
	}
	cfg.Owner = bench.SluiceRLSOwner(c, limitPeriod)
	t, err := bench.NewRLSTarget(cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	return ownerRLSTarget{t, c}, nil
}
