package node

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/api"
	"github.com/sluice-rl/sluice/rls"
)

// newRLS builds the Envoy rate limit service on the node's gRPC server and,
// with Config.RLSConfig, loads its configuration and prepares the watch
// that Run starts.
func (n *Node) newRLS(reg prometheus.Registerer, tm *api.Metrics) error {
	var err error
	n.rls, err = api.NewRLS(api.RLSConfig{
		Checker:       n.limiter,
		Clock:         n.cfg.Clock,
		Registerer:    reg,
		Metrics:       tm,
		MaxMetricKeys: n.cfg.RLSMaxMetricKeys,
		Logger:        n.log,

		NearLimitRatio:  float32(n.cfg.RLSNearLimitRatio),
		ShadowMode:      n.cfg.RLSShadowMode,
		ResponseHeaders: n.cfg.RLSResponseHeaders,
		LimitHeader:     n.cfg.RLSLimitHeader,
		RemainingHeader: n.cfg.RLSRemainingHeader,
		ResetHeader:     n.cfg.RLSResetHeader,
	})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.rls.Register(n.grpc.Server, n.grpc.Health)
	if n.cfg.RLSConfig == "" {
		n.log.Debug("no RLS configuration: every domain is unknown, every descriptor answered OK")
		return nil
	}
	n.rlsLoad, err = rls.NewReloader(rls.ReloaderConfig{
		Path: n.cfg.RLSConfig,
		Apply: func(c *rls.Config) {
			n.rls.SetConfig(c)
			n.rlsState.record(n.now(), "applied")
		},
		Rejected: func(err error) {
			n.rls.ConfigRejected(err)
			n.rlsState.record(n.now(), "rejected: "+err.Error())
		},
		Logger: n.log,
	})
	if err != nil {
		return fmt.Errorf("node: RLSConfig: %w", err)
	}
	c := n.rlsLoad.Config()
	n.rlsState.record(n.now(), "loaded")
	n.log.Info("RLS configuration loaded", "path", n.cfg.RLSConfig, "files", len(c.Files), "domains", len(c.Domains()))
	return nil
}
