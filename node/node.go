package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/transport"
)

// Node is one Sluice server. Build it with New, start it with Run.
type Node struct {
	cfg     Config
	log     *slog.Logger
	limiter *limiter.Limiter
	grpc    *transport.GRPC
	http    *http.Server
	grpcLn  net.Listener
	httpLn  net.Listener
	ready   atomic.Bool
	ran     atomic.Bool
}

// New builds a node and binds its listeners, so that GRPCAddr and HTTPAddr
// report real ports (for ":0") before Run is called. A node that is never
// Run must be closed with Close.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("node", cfg.NodeName)
	set := policy.Empty()
	if cfg.PolicyFile != "" {
		var err error
		if set, err = policy.Load(cfg.PolicyFile); err != nil {
			return nil, fmt.Errorf("node: policies: %w", err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	lim, err := limiter.New(limiter.Config{
		NodeName:   cfg.NodeName,
		Clock:      cfg.Clock,
		Store:      cfg.Store,
		Policies:   set,
		Registerer: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	tm, err := transport.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	g, err := transport.NewGRPC(transport.GRPCConfig{Service: lim, Metrics: tm})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n := &Node{cfg: cfg, log: log, limiter: lim, grpc: g}
	n.http = &http.Server{
		Handler: transport.NewHTTPHandler(transport.HTTPConfig{
			Checker:  lim,
			Gatherer: reg,
			Metrics:  tm,
			Ready:    n.ready.Load,
			Logger:   log,
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if n.grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return nil, fmt.Errorf("node: grpc listen %s: %w", cfg.GRPCAddr, err)
	}
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		n.grpcLn.Close()
		return nil, fmt.Errorf("node: http listen %s: %w", cfg.HTTPAddr, err)
	}
	return n, nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.NodeName }

// GRPCAddr returns the bound gRPC address.
func (n *Node) GRPCAddr() string { return n.grpcLn.Addr().String() }

// HTTPAddr returns the bound HTTP address.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// Limiter returns the node's limiter.
func (n *Node) Limiter() *limiter.Limiter { return n.limiter }

// Ready reports whether the node is serving and not shutting down.
func (n *Node) Ready() bool { return n.ready.Load() }

// Close releases the listeners of a node that was never Run.
func (n *Node) Close() error {
	if n.ran.Load() {
		return nil
	}
	return errors.Join(n.grpcLn.Close(), n.httpLn.Close())
}

// Reload re-reads the policy file. A bad file keeps the policies in force
// and returns why.
func (n *Node) Reload() error {
	if n.cfg.PolicyFile == "" {
		return nil
	}
	set, err := policy.Load(n.cfg.PolicyFile)
	if err != nil {
		n.log.Error("policy reload failed; keeping the old policies", "file", n.cfg.PolicyFile, "err", err)
		return fmt.Errorf("node: reload: %w", err)
	}
	n.limiter.SetPolicies(set)
	n.log.Info("policies reloaded", "file", n.cfg.PolicyFile, "policies", set.Len())
	return nil
}

// Run serves until ctx is done, then shuts down gracefully: it reports
// NOT_SERVING and not-ready, drains in-flight calls (up to
// ShutdownTimeout) and returns. It returns nil after a clean shutdown.
func (n *Node) Run(ctx context.Context) error {
	if !n.ran.CompareAndSwap(false, true) {
		return errors.New("node: Run called twice")
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := n.grpc.Server.Serve(n.grpcLn); err != nil && !errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("node: grpc serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := n.http.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("node: http serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		t := time.NewTicker(n.cfg.SweepInterval)
		defer t.Stop()
		for {
			select {
			case <-gctx.Done():
				return nil
			case <-t.C:
				if dropped := n.limiter.Sweep(); dropped > 0 {
					n.log.Debug("swept expired keys", "dropped", dropped)
				}
			}
		}
	})
	g.Go(func() error {
		<-gctx.Done()
		return n.shutdown()
	})
	n.ready.Store(true)
	n.log.Info("sluice node serving", "grpc", n.GRPCAddr(), "http", n.HTTPAddr())
	return g.Wait()
}

// shutdown stops serving: not ready, NOT_SERVING, then drain.
func (n *Node) shutdown() error {
	n.ready.Store(false)
	n.grpc.Health.Shutdown()
	n.log.Info("shutting down: draining in-flight calls", "timeout", n.cfg.ShutdownTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	var err error
	if e := n.http.Shutdown(ctx); e != nil {
		err = fmt.Errorf("node: http shutdown: %w", e)
	}
	done := make(chan struct{})
	go func() {
		n.grpc.Server.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		n.grpc.Server.Stop()
		<-done
		err = errors.Join(err, errors.New("node: grpc drain timed out; remaining calls were cut"))
	}
	n.log.Info("stopped")
	return err
}
