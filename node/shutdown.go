package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/ring"
)

// shutdown leaves gracefully: not ready and NOT_SERVING; leave the gossip
// cluster; hand every key to its new owner; keep answering for LeaveLinger
// (forwarding to the new owners) for nodes whose ring lags; then drain
// in-flight calls and stop.
func (n *Node) shutdown() error {
	n.stopping.Store(true)
	defer n.shutdownTracing() // last: the servers and peer client have ended their spans
	defer n.caps.close()
	if n.crashed.Load() {
		n.limiter.Close()
		n.epochs.stop(true)
		return errors.Join(n.peers.Close(), n.closeDisk()) // nothing more written
	}
	n.grpc.Health.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	n.log.Info("shutting down: leaving the cluster")
	n.limiter.SetLeaving()
	var errs []error
	if err := n.cluster.Leave(5 * time.Second); err != nil {
		// Not fatal: the others also learn of the departure by probing,
		// and the handoff below does not depend on it.
		n.log.Info("leave not confirmed by gossip; handing off anyway", "err", err)
	}
	n.feedView() // the group: this node leaves
	var others []ring.Member
	for _, m := range n.cluster.Snapshot().Members {
		if rm, ok := ringMember(m); ok && m.Name != n.cfg.NodeName {
			others = append(others, rm)
		}
	}
	if len(others) > 0 {
		if err := n.limiter.SetMembers(others); err != nil {
			errs = append(errs, err)
		} else {
			moved, err := n.limiter.HandOff(ctx)
			n.log.Info("handed off keys", "states", moved, "err", err)
			if err != nil {
				errs = append(errs, fmt.Errorf("node: handoff: %w", err))
			}
		}
		select {
		case <-time.After(n.cfg.LeaveLinger):
		case <-ctx.Done():
		}
	}
	n.leaveEpochs(ctx)
	n.epochs.stop(true)
	n.log.Info("draining in-flight calls")
	if err := n.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("node: http shutdown: %w", err))
	}
	n.grpc.DrainStreams()
	n.peerSrv.Drain()
	done := make(chan struct{})
	go func() {
		n.grpc.Server.GracefulStop()
		n.peerGRPC.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		n.grpc.Server.Stop()
		n.peerGRPC.Stop()
		<-done
		errs = append(errs, errors.New("node: grpc drain timed out; remaining calls were cut"))
	}
	n.limiter.WaitCredits(ctx) // returns taken while leaving, credited to the new owners
	errs = append(errs, n.flushDisk(), n.closeDisk())
	n.limiter.Close()
	errs = append(errs, n.cluster.Shutdown(), n.peers.Close())
	n.log.Info("stopped")
	return errors.Join(errs...)
}
