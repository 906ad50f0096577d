package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
)

// Run joins the cluster and serves until ctx is done, then shuts down
// gracefully (see shutdown). It returns nil after a clean shutdown.
func (n *Node) Run(ctx context.Context) error {
	if !n.ran.CompareAndSwap(false, true) {
		return errors.New("node: Run called twice")
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// ErrServerStopped: shutdown stopped the server before Serve began
		// (a cancel right after start), which is a clean exit too.
		if err := n.grpc.Server.Serve(n.grpcLn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("node: grpc serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := n.serveHTTP(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("node: http serve: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := n.peerGRPC.Serve(n.peerLn); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("node: peer serve: %w", err)
		}
		return nil
	})
	g.Go(func() error { return n.cluster.Run(gctx) })
	g.Go(func() error { n.handoffLoop(gctx); return nil })
	g.Go(func() error { n.sweepLoop(gctx); return nil })
	if n.cfg.Replicas != 0 || n.disk.w != nil {
		g.Go(func() error { n.replicateLoop(gctx); return nil })
	}
	if n.disk.w != nil {
		g.Go(func() error { n.diskLoop(gctx); return nil })
	}
	g.Go(func() error { n.activityLoop(gctx); return nil })
	g.Go(func() error { n.caps.run(gctx); return nil })
	if n.rlsLoad != nil {
		g.Go(func() error { return n.rlsLoad.Run(gctx) })
	}
	if n.rlsXDS != nil {
		g.Go(func() error { return n.rlsXDS.Run(gctx) })
	}
	if n.policyLoad != nil {
		g.Go(func() error { return n.policyLoad.Run(gctx) })
	}
	if n.sec.secret != nil {
		g.Go(func() error { return n.sec.secret.Run(gctx) })
	}
	g.Go(func() error { n.metaLoop(gctx); return nil })
	g.Go(n.epochs.run) // on a context of its own, which shutdown ends
	g.Go(func() error { n.ringLoop(gctx); return nil })
	g.Go(func() error {
		<-gctx.Done()
		return n.shutdown()
	})
	n.serving.Store(true)
	n.log.Info("sluice node serving", "grpc", n.GRPCAddr(), "http", n.HTTPAddr(), "peer", n.PeerAddr(), "gossip", n.GossipAddr(),
		"join", n.cfg.Join, "tls", n.sec.public != nil, "mtls", n.sec.clientAuth, "peer_tls", n.sec.peer != nil, "cluster_auth", n.auth.String())
	n.logClusterAuth()
	return g.Wait()
}
