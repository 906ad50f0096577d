package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Epochs on peer calls (issue 31, docs/cluster.md "Epochs on peer calls").
// With Config.Epoch set, every peer call this node sends carries the epoch
// of the ring it routes by (the transport stamps it), and every call it
// serves is judged by the sender's (WithSenderEpoch; 0 = unknown, a node
// of peer protocol 1, one without epochs or a leaving one, served as
// before; a leaving node also serves every call as before):
//
//   - a sender ahead of this node: the call waits, up to CatchUpWait, for
//     this node to apply the sender's epoch; if it does not, the call is
//     refused with an EpochError (ErrEpochBehind), nothing applied, and
//     the sender answers it as for an unreachable owner (the key's heir or
//     its failure mode);
//   - a sender behind this node, on a first hop, for keys this node does
//     not own on its ring: the call is refused with an EpochError
//     (ErrEpochAhead) carrying this node's epoch, nothing applied; the
//     sender waits, up to CatchUpWait, to apply that epoch and routes the
//     items again once, on its new ring, as a second hop (which is decided
//     where it lands: the retry is bounded by the hop budget). A sender that
//     does not catch up answers them as for an unreachable owner.
//
// The cost on a served call is one load of the applied epoch per call (per
// batch, not per item).

// DefaultCatchUpWait is Config.CatchUpWait's default.
const DefaultCatchUpWait = 300 * time.Millisecond

// ErrEpochBehind is wrapped by an EpochError of a receiver that did not
// apply the sender's epoch within CatchUpWait: nothing was applied.
var ErrEpochBehind = fmt.Errorf("%w: %w: the receiver did not apply the sender's epoch in time", ErrPeerUnavailable, ErrNotSent)

// ErrEpochAhead is wrapped by an EpochError of a receiver whose epoch is
// ahead of the sender's and that does not own the call's keys on its
// ring: a redirect, nothing applied.
var ErrEpochAhead = fmt.Errorf("%w: %w: the receiver is ahead of the sender's epoch and does not own the keys", ErrPeerUnavailable, ErrNotSent)

// EpochError refuses a peer call for its epoch; it wraps ErrEpochAhead
// (a redirect) or ErrEpochBehind, both of which wrap ErrPeerUnavailable
// and ErrNotSent.
type EpochError struct {
	// Epoch is the receiver's applied epoch when it answered.
	Epoch uint64
	// Ahead: the receiver is ahead of the sender (a redirect); else it is
	// behind and did not catch up in time.
	Ahead bool
}

func (e *EpochError) Error() string {
	if e.Ahead {
		return fmt.Sprintf("%v (its epoch %d)", ErrEpochAhead, e.Epoch)
	}
	return fmt.Sprintf("%v (its epoch %d)", ErrEpochBehind, e.Epoch)
}

func (e *EpochError) Unwrap() error {
	if e.Ahead {
		return ErrEpochAhead
	}
	return ErrEpochBehind
}

type senderEpochKey struct{}

// WithSenderEpoch marks ctx, the context of a peer call served, with the
// sender's epoch (the transport's server calls it with the request's
// field); 0 leaves ctx as it is (unknown: served as before epochs).
func WithSenderEpoch(ctx context.Context, e uint64) context.Context {
	if e == 0 {
		return ctx
	}
	return context.WithValue(ctx, senderEpochKey{}, e)
}

// SenderEpoch is the epoch WithSenderEpoch put on ctx, or 0.
func SenderEpoch(ctx context.Context) uint64 {
	e, _ := ctx.Value(senderEpochKey{}).(uint64)
	return e
}

// Epoch is the epoch of the ring this node routes by (Config.Epoch), or 0
// when it uses no epochs or is leaving (SetLeaving: its ring is its own,
// no epoch's, and it may never apply the epoch that removes it); the
// transport stamps it on the calls it sends.
func (l *Limiter) Epoch() uint64 {
	if l.epoch == nil || l.leaving.Load() {
		return 0
	}
	return l.epoch()
}

// catchUp is the receiver's first step on a peer call that carries keys
// (but on a leaving node, which may never apply the epoch that removes
// it):
// if the sender's epoch is ahead of this node's, it waits up to
// CatchUpWait for this node to apply it, and returns an EpochError
// (ErrEpochBehind) if it does not. It returns the sender's epoch and this
// node's (0, 0 without epochs on either side).
func (l *Limiter) catchUp(ctx context.Context) (sender, mine uint64, err error) {
	if l.epoch == nil || l.leaving.Load() {
		return 0, 0, nil // a leaving node serves as before (leavingForwards)
	}
	if sender = SenderEpoch(ctx); sender == 0 {
		return 0, 0, nil
	}
	if mine = l.epoch(); sender <= mine {
		return sender, mine, nil
	}
	wctx, cancel := context.WithTimeout(ctx, l.catchUpWait)
	defer cancel()
	if err := l.waitEpoch(wctx, sender); err != nil {
		return sender, 0, &EpochError{Epoch: l.epoch()}
	}
	return sender, l.epoch(), nil
}

// settleEpoch is catchUp for the calls that move states (Fetch, Handoff,
// replication): they wait as long for this node to apply the sender's
// epoch, then are served as before whether it did or not (refusing them
// would only delay the states' move: their senders keep them and try
// again, and the owner fetches what it lacks).
func (l *Limiter) settleEpoch(ctx context.Context) {
	_, _, _ = l.catchUp(ctx)
}

// epochGate is catchUp, then the redirect of a first-hop call (hops 0)
// from a sender behind this node for keys it does not own on its ring
// (keys are the items whose owner matters: not acting checks nor grant
// returns, which go to the heir and the issuer).
func (l *Limiter) epochGate(ctx context.Context, hops int, items []Forwarded) error {
	sender, mine, err := l.catchUp(ctx)
	if err != nil {
		l.metrics.epochRefused.Inc()
		return err
	}
	if sender == 0 || sender >= mine || hops > 0 {
		return err
	}
	v := l.view.Load()
	for i := range items {
		it := &items[i]
		if it.Acting || it.Return != 0 {
			continue
		}
		if _, ok := l.route(v, it.Hash); !ok {
			l.metrics.epochRedirected.Inc()
			return &EpochError{Epoch: mine, Ahead: true}
		}
	}
	return nil
}

// catchUpTo waits up to CatchUpWait for this node to apply epoch e (a
// receiver's, which redirected this node's call) and reports whether it
// did.
func (l *Limiter) catchUpTo(ctx context.Context, e uint64) bool {
	if l.waitEpoch == nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, l.catchUpWait)
	defer cancel()
	return l.waitEpoch(wctx, e) == nil
}

// redirected handles a receiver's redirect (an EpochError wrapping
// ErrEpochAhead) of a call this node sent with hops 0 on view v: it waits
// up to CatchUpWait for this node to apply the receiver's epoch and
// returns the view to route the call again on, or nil (no redirect, or
// this node did not catch up, or its ring did not change).
func (l *Limiter) redirected(ctx context.Context, v *view, hops int, err error) *view {
	var ee *EpochError
	if hops != 0 || !errors.As(err, &ee) || !ee.Ahead || !l.catchUpTo(ctx, ee.Epoch) {
		return nil
	}
	if nv := l.view.Load(); nv != v {
		return nv
	}
	return nil
}
