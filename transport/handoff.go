package transport

import (
	"context"
	"fmt"
	"math"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	"github.com/sluice-rl/sluice/limiter"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// Fetch and Handoff move key states between owners: Fetch pulls them from
// their previous owner, Handoff pushes them to their new one.

// Bounds of the Fetch RPC.
const (
	// fetchBatch is the most hashes in one Fetch RPC.
	fetchBatch = 256
	// fetchRecvBytes is the largest Fetch response accepted: a sliding
	// log state can be large (MaxSlidingLogLimit entries).
	fetchRecvBytes = 128 << 20
)

// Fetch moves the states of hashes from node from (their previous owner)
// to the caller. Concurrent fetches from the same node are coalesced like
// checks (adaptively, without BatchWindow). A state is returned to every
// concurrent caller that asked for its hash.
func (c *PeerClient) Fetch(ctx context.Context, from ring.Member, hashes []uint64) ([]store.Entry, error) {
	if len(hashes) == 0 {
		return nil, nil
	}
	p, err := c.peerFor(from)
	if err != nil {
		return nil, err
	}
	if p.br.rejects() {
		return nil, p.circuitErr
	}
	b := p.fetch
	calls := make([]*fetchCall, 0, (len(hashes)+fetchBatch-1)/fetchBatch)
	for off := 0; off < len(hashes); off += fetchBatch {
		pc := b.get()
		pc.In = hashes[off:min(off+fetchBatch, len(hashes))]
		calls = append(calls, pc)
	}
	var out []store.Entry
	err = b.do(ctx, calls, func(pc *fetchCall) {
		out = append(out, pc.Out...)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sendFetch is the Fetch batcher's flush: one RPC for calls, unless the
// circuit is open.
func (p *peerConn) sendFetch(ctx context.Context, calls []*fetchCall, _ int) {
	callers := callersDeadline(ctx, calls)
	live, n, tk, ok := admitBatch(p, calls)
	if !ok {
		return
	}
	hashes := make([]uint64, 0, n)
	for _, pc := range live {
		hashes = append(hashes, pc.In...)
	}
	p.c.m.rpc(peerFetch)
	resp, err := p.rpc.Fetch(ctx, &sluicev1.FetchRequest{From: p.c.cfg.Self, Hashes: hashes, Epoch: p.c.epoch()}, grpc.MaxCallRecvMsgSize(fetchRecvBytes))
	p.br.record(tk, rpcOutcome(err, callers))
	if err != nil {
		p.c.m.rpcError(peerFetch)
		wire.FailAll(live, p.unavailable("Fetch", err))
		return
	}
	// The owner deleted what it sent: keep every state it could send, even
	// if one is malformed (that one is dropped; it cannot be imported).
	// A key may come more than once: its state and a copy on its way to a
	// new owner, or an heir's copy; the caller merges them. More than
	// fetchCopies per hash asked is not an answer to this call; a state of
	// a key not asked is dropped.
	states := resp.GetStates()
	if len(states) > fetchCopies*len(hashes) {
		err := fmt.Errorf("%d states for %d hashes", len(states), len(hashes))
		wire.FailAll(live, p.unavailable("Fetch", err))
		return
	}
	asked := make(map[uint64]struct{}, len(hashes))
	for _, h := range hashes {
		asked[h] = struct{}{}
	}
	entries := make([]store.Entry, 0, len(states))
	for _, ks := range states {
		var e store.Entry
		if fromKeyState(&e, ks) != nil {
			continue
		}
		if _, ok := asked[e.Key]; ok {
			entries = append(entries, e)
		}
	}
	if len(live) == 1 {
		if pc := live[0]; pc.Claim() {
			pc.Out = entries
			pc.Answer(nil)
		}
		return
	}
	given := make([]bool, len(entries))
	for _, pc := range live {
		if !pc.Claim() {
			continue
		}
		var out []store.Entry
		for i := range entries {
			if !slices.Contains(pc.In, entries[i].Key) {
				continue
			}
			e := entries[i]
			if given[i] { // also asked for by another caller: its own copy
				e.Log.Entries = slices.Clone(e.Log.Entries)
				e.Leases.Leases = slices.Clone(e.Leases.Leases)
			}
			given[i] = true
			out = append(out, e)
		}
		pc.Out = out
		pc.Answer(nil)
	}
}

// fetchCopies bounds the states a Fetch answer may hold per hash asked:
// the owner's state, copies of it travelling to new owners, an heir's copy.
const fetchCopies = 4

// Bounds of the Handoff RPC.
const (
	// handoffBytes and MaxHandoffStates bound one Handoff RPC, well below
	// gRPC's default 4 MiB limit on the receiver.
	handoffBytes = 1 << 20
	// handoffTimeouts is a Handoff RPC's deadline in units of Timeout.
	handoffTimeouts = 5
)

// Handoff pushes states to node to, their new owner, in RPCs of at most
// about 1 MiB, and sends donePartitions with the last one, so the receiver
// learns a partition is complete only after all its states arrived. States
// the receiver refuses (its store is full) are counted in the metrics; they
// are not an error. Each RPC passes the peer's circuit breaker: an open
// circuit fails the Handoff before its next RPC.
func (c *PeerClient) Handoff(ctx context.Context, to ring.Member, entries []store.Entry, donePartitions []int) error {
	return c.handoff(ctx, to, entries, donePartitions, false)
}

// Replicate sends copies of states this node owns to node to, an heir of
// their keys, over the Handoff RPC (replica set), in RPCs of at most about
// 1 MiB, as Handoff does.
func (c *PeerClient) Replicate(ctx context.Context, to ring.Member, entries []store.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	return c.handoff(ctx, to, entries, nil, true)
}

// handoff is Handoff, or Replicate when replica is set.
func (c *PeerClient) handoff(ctx context.Context, to ring.Member, entries []store.Entry, donePartitions []int, replica bool) error {
	if len(entries) == 0 && len(donePartitions) == 0 {
		return nil
	}
	var done []int32
	if len(donePartitions) > 0 {
		done = make([]int32, len(donePartitions))
		for i, d := range donePartitions {
			if d < 0 || d > math.MaxInt32 {
				return fmt.Errorf("transport: PeerClient.Handoff: partition %d out of range", d)
			}
			done[i] = int32(d)
		}
	}
	p, err := c.peerFor(to)
	if err != nil {
		return err
	}
	for start := 0; ; {
		end, size := start, 0
		for end < len(entries) && end-start < MaxHandoffStates {
			s := keyStateSize(&entries[end])
			if end > start && size+s > handoffBytes {
				break
			}
			size += s
			end++
		}
		req := &sluicev1.HandoffRequest{From: c.cfg.Self, Replica: replica, Epoch: c.epoch()}
		if end > start {
			states := make([]sluicev1.KeyState, end-start)
			req.States = make([]*sluicev1.KeyState, end-start)
			for i := range states {
				req.States[i] = toKeyState(&states[i], &entries[start+i])
			}
		}
		last := end == len(entries)
		if last {
			req.DonePartitions = done
		}
		tk, ok := p.br.allow()
		if !ok {
			return p.circuitErr
		}
		rctx, cancel := context.WithTimeout(ctx, handoffTimeouts*c.cfg.Timeout)
		c.m.rpc(peerHandoff)
		resp, err := p.rpc.Handoff(rctx, req)
		p.br.record(tk, directOutcome(ctx, rctx, err))
		cancel()
		if status.Code(err) == codes.FailedPrecondition {
			return fmt.Errorf("%w: %s: %w", limiter.ErrPeerUnavailable, p.name, limiter.ErrLeaving)
		}
		if err != nil {
			return p.callErr(ctx, peerHandoff, err)
		}
		c.m.refused(resp.GetRefused())
		if last {
			return nil
		}
		start = end
	}
}
