package node

import (
	"context"
	"sync"
	"sync/atomic"
)

// ringEpoch is the epoch of the ring installed in the limiter (ringLoop):
// 0 until the node routes by the ring's epochs. It is the limiter's and
// the peer client's epoch source (limiter.Config.Epoch and WaitEpoch,
// transport.PeerClientConfig.Epoch: docs/cluster.md "Epochs on peer
// calls"): the epoch a peer call carries is the one whose ring routed it.
type ringEpoch struct {
	n       atomic.Uint64
	mu      sync.Mutex
	changed chan struct{} // closed when n changes (then replaced); nil until a waiter needs it
}

// load is the installed ring's epoch: one atomic load.
func (r *ringEpoch) load() uint64 { return r.n.Load() }

// set records e as installed (never going back) and wakes the waiters.
func (r *ringEpoch) set(e uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e <= r.n.Load() {
		return
	}
	r.n.Store(e)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

// wait returns once the installed ring's epoch is at least e, or ctx's
// error when it ends first.
func (r *ringEpoch) wait(ctx context.Context, e uint64) error {
	for {
		r.mu.Lock()
		if r.n.Load() >= e {
			r.mu.Unlock()
			return nil
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
