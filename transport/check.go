package transport

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
)

// Check applies items on node to and fills out[i] for items[i]. Calls to
// the same node are coalesced; see PeerClientConfig. An error means the
// node did not answer (it wraps limiter.ErrPeerUnavailable, and also
// ErrCircuitOpen when the node's circuit breaker is open and no RPC was
// sent), or is ctx.Err() when ctx ended first; out is then unspecified.
func (c *PeerClient) Check(ctx context.Context, to ring.Member, hops int, items []limiter.Forwarded, out []limiter.Answer) error {
	if len(items) == 0 {
		return nil
	}
	if len(out) < len(items) {
		return fmt.Errorf("transport: PeerClient.Check: %d answers for %d items", len(out), len(items))
	}
	if hops < 0 || hops > maxPeerHops {
		return fmt.Errorf("transport: PeerClient.Check: hops %d out of [0, %d]", hops, maxPeerHops)
	}
	p, err := c.peerFor(to)
	if err != nil {
		return err
	}
	if p.br.rejects() { // fail at once, without queueing
		return p.circuitErr
	}
	b, err := p.checkBatcher(uint32(hops))
	if err != nil {
		return err
	}
	maxBatch := c.cfg.MaxBatch
	if len(items) <= maxBatch {
		pc := b.get()
		pc.In, pc.Out = items, out[:len(items)]
		one := [1]*checkCall{pc}
		return b.do(ctx, one[:], nil)
	}
	calls := make([]*checkCall, 0, (len(items)+maxBatch-1)/maxBatch)
	for off := 0; off < len(items); off += maxBatch {
		end := min(off+maxBatch, len(items))
		pc := b.get()
		pc.In, pc.Out = items[off:end], out[off:end]
		calls = append(calls, pc)
	}
	return b.do(ctx, calls, nil)
}

// sendCheck is the Check batcher's flush: one RPC for calls, unless the
// circuit is open.
func (p *peerConn) sendCheck(ctx context.Context, hops uint32, calls []*checkCall, _ int) {
	callers := callersDeadline(ctx, calls)
	live, n, tk, ok := admitBatch(p, calls)
	if !ok {
		return
	}
	// One allocation each for the items, their limits and their pointers.
	items := make([]sluicev1.PeerItem, n)
	limits := make([]sluicev1.PeerLimit, n)
	req := &sluicev1.PeerCheckRequest{From: p.c.cfg.Self, Hops: hops, Epoch: p.c.epoch(), Items: make([]*sluicev1.PeerItem, n)}
	k := 0
	for _, pc := range live {
		for i := range pc.In {
			req.Items[k] = toPeerItem(&items[k], &limits[k], &pc.In[i])
			k++
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		// The owner skips the items once the callers have given up.
		req.TimeoutNs = max(int64(time.Until(dl)), 1)
	}
	p.c.m.checkRPC(n)
	results, err := p.mux.call(ctx, req)
	p.br.record(tk, rpcOutcome(err, callers))
	if err == nil && len(results) != n {
		err = status.Errorf(codes.Internal, "peer answered %d results for %d items", len(results), n)
	}
	if err != nil {
		p.c.m.rpcError(peerCheck)
		wire.FailAll(live, p.unavailable("Check", err))
		return
	}
	for _, pc := range live {
		res := results[:len(pc.In)]
		results = results[len(pc.In):]
		if pc.Claim() {
			for i := range pc.Out {
				fromPeerResult(&pc.Out[i], res[i])
			}
			pc.Answer(nil) // pc may be reused from here on
		}
	}
}
