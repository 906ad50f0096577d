package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluice-rl/sluice/internal/bench"
	"github.com/sluice-rl/sluice/internal/procs"
)

// startSluiceCluster starts the 3 nodes; with rls, serving the RLS
// scenarios' config (rls.go) too.
func (r *runner) startSluiceCluster(ctx context.Context, rls bool) {
	r.logf("starting a 3-node Sluice cluster (%s)", r.o.sluiceBin)
	var extra []string
	if rls {
		path, err := r.writeRLSConfig()
		if err != nil {
			r.sluiceErr = err
			r.logf("sluice: %v", err)
			return
		}
		extra = []string{"--rls-config", path}
	}
	nodes, err := startSluice(ctx, r.cs, r.o.sluiceBin, 3, "sluice-", r.o.nodeEnv(), extra...)
	if err != nil {
		r.sluiceErr = err
		r.logf("sluice: %v", err)
		return
	}
	r.sluice = nodes
}

// startSluiceOne starts the 1-node Sluice of the RLS scenarios, with Go's
// default GOMAXPROCS (all cores), as envoyproxy/ratelimit runs.
func (r *runner) startSluiceOne(ctx context.Context) {
	r.logf("starting a 1-node Sluice (%s)", r.o.sluiceBin)
	path, err := r.writeRLSConfig()
	if err == nil {
		var nodes []*sluiceNode
		if nodes, err = startSluice(ctx, r.cs, r.o.sluiceBin, 1, "sluice-one-", nil, "--rls-config", path); err == nil {
			r.sluice1 = nodes[0]
		}
	}
	if err != nil {
		r.sluice1Err = err
		r.logf("sluice (1 node): %v", err)
	}
}

func (r *runner) startRedis(ctx context.Context) {
	bin, err := procs.EnsureRedis(ctx, "benchcompare")
	if err != nil {
		r.redisErr = err
		r.logf("redis: %v", err)
		return
	}
	r.redisBin = bin
	ports, err := procs.FreePorts(1)
	if err != nil {
		r.redisErr = err
		return
	}
	r.redisAddr = procs.Loopback(ports[0])
	r.logf("starting redis-server on %s", r.redisAddr)
	c, err := r.cs.start("redis", bin, procs.RedisArgs(ports[0], r.cs.dir)...)
	if err == nil {
		err = procs.WaitTCP(ctx, c, r.redisAddr, 15*time.Second)
	}
	if err != nil {
		r.redisErr = err
		r.logf("redis: %v", err)
		return
	}
	r.redis = c
}

func (r *runner) startEcho(ctx context.Context) {
	exe, err := os.Executable()
	if err != nil {
		r.echoErr = err
		return
	}
	ports, err := procs.FreePorts(1)
	if err != nil {
		r.echoErr = err
		return
	}
	r.echoAddr = procs.Loopback(ports[0])
	r.logf("starting the gRPC echo on %s", r.echoAddr)
	c, err := r.cs.start("echo", exe, "echo-server", "--addr", r.echoAddr)
	if err == nil {
		err = procs.WaitTCP(ctx, c, r.echoAddr, 15*time.Second)
	}
	if err != nil {
		r.echoErr = err
		r.logf("echo: %v", err)
		return
	}
	r.echo = c
}

// servers returns the system's server processes, or why there are none.
func (r *runner) servers(sys string) ([]*child, error) {
	switch sys {
	case "sluice", "sluice-nogrants", "sluice-owner":
		if r.sluiceErr != nil {
			return nil, r.sluiceErr
		}
		var cs []*child
		for _, n := range r.sluice {
			cs = append(cs, n.child)
		}
		return cs, nil
	case "sluice1":
		if r.sluice1Err != nil {
			return nil, r.sluice1Err
		}
		return []*child{r.sluice1.child}, nil
	case "redis":
		if r.redisErr != nil {
			return nil, r.redisErr
		}
		return []*child{r.redis}, nil
	case "echo":
		if r.echoErr != nil {
			return nil, r.echoErr
		}
		return []*child{r.echo}, nil
	case "ratelimit":
		if r.refErr != nil {
			return nil, r.refErr
		}
		return []*child{r.ref, r.redis}, nil
	case "gubernator":
		if r.gubErr != nil {
			return nil, r.gubErr
		}
		var cs []*child
		for _, n := range r.gub {
			cs = append(cs, n.child)
		}
		return cs, nil
	}
	return nil, fmt.Errorf("unknown system %q", sys)
}

// newTarget builds a fresh Target for one run.
func (r *runner) newTarget(ctx context.Context, sc scenario, sys string) (bench.Target, error) {
	if sc.RLS {
		return r.newRLSTarget(ctx, sys)
	}
	switch sys {
	case "sluice", "sluice-nogrants":
		addrs := make([]string, len(r.sluice))
		for i, n := range r.sluice {
			addrs[i] = n.grpc
		}
		grants := sys == "sluice" && r.o.grantsIn(sc.grantsID())
		return bench.NewSluiceTarget(addrs, limitN, limitBurst, limitPeriod, grants)
	case "redis":
		t, err := newRedisTarget(ctx, r.redisAddr, sc.Workers, limitN, limitBurst, limitPeriod)
		if err != nil {
			return nil, err
		}
		if err := t.flushAll(ctx); err != nil {
			t.Close()
			return nil, fmt.Errorf("redis: flushall: %w", err)
		}
		return t, nil
	case "echo":
		return newEchoTarget(r.echoAddr, limitN, limitBurst, limitPeriod)
	case "gubernator":
		return newGubTarget(r.gub, limitN, limitPeriod)
	}
	return nil, fmt.Errorf("unknown system %q", sys)
}
