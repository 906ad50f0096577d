package node

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/api"
	"github.com/sluice-rl/sluice/rls"
	"github.com/sluice-rl/sluice/rls/xds"
)

// newRLS builds the Envoy rate limit service on the node's gRPC server and,
// with Config.RLSConfig, loads its configuration and prepares the watch
// that Run starts; with Config.RLSXDS, prepares the xDS client Run starts.
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
	switch {
	case n.cfg.RLSXDS != nil:
		n.rlsXDS, err = xds.New(xds.Config{Settings: *n.cfg.RLSXDS, Apply: n.applyRLS,
			Rejected: n.rejectRLS, Logger: n.log})
		if err != nil {
			return xdsSettingsErr(err)
		}
		n.log.Info("RLS configuration over xDS", "server", n.cfg.RLSXDS.ServerURL, "node_id", n.cfg.RLSXDS.NodeID)
		return nil
	case n.cfg.RLSConfig == "":
		n.log.Debug("no RLS configuration: every domain is unknown, every descriptor answered OK")
		return nil
	}
	n.rlsLoad, err = rls.NewReloader(rls.ReloaderConfig{
		Path:     n.cfg.RLSConfig,
		Apply:    n.applyRLS,
		Rejected: n.rejectRLS,
		Logger:   n.log,
	})
	if err != nil {
		return fmt.Errorf("node: RLSConfig: %w", err)
	}
	c := n.rlsLoad.Config()
	n.rlsState.record(n.now(), "loaded")
	n.log.Info("RLS configuration loaded", "path", n.cfg.RLSConfig, "files", len(c.Files), "domains", len(c.Domains()))
	return nil
}

// applyRLS swaps in a new RLS configuration (the counters, the limiter's,
// stay) and has its hash gossiped.
func (n *Node) applyRLS(c *rls.Config) {
	n.rls.SetConfig(c)
	n.setRLSHash(c)
	n.rlsState.record(n.now(), "applied")
	n.kickMeta()
}

// rejectRLS counts and shows (/ui) a configuration that was refused; the
// one in force stays.
func (n *Node) rejectRLS(err error) {
	n.rls.ConfigRejected(err)
	n.rlsState.record(n.now(), "rejected: "+err.Error())
}

// setRLSHash records the short hash of c, the one the node gossips.
func (n *Node) setRLSHash(c *rls.Config) {
	h := c.ContentHash
	if len(h) > 16 {
		h = h[:16]
	}
	n.rlsHash.Store(&h)
}

// RLSHash returns the short hash (16 hex digits) of the RLS configuration
// in force, which the node gossips in its metadata: equal on nodes that
// load files of the same contents (rls.Config.ContentHash) or the same xDS
// resources.
func (n *Node) RLSHash() string { return *n.rlsHash.Load() }
