package transport

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrCircuitOpen marks a peer call that was not sent because the peer's
// circuit breaker is open (see PeerClientConfig.BreakerFailures). Such an
// error also wraps limiter.ErrPeerUnavailable.
var ErrCircuitOpen = errors.New("transport: circuit open")

// The states of a breaker, in the low bits of breaker.st.
const (
	circuitClosed   uint64 = iota // calls go through
	circuitOpen                   // calls fail at once until the cooldown ends
	circuitHalfOpen               // one call (the probe) is in flight; others fail at once
)

// The layout of breaker.st: generation<<circuitGenShift | state.
const (
	circuitStateMask uint64 = 3
	circuitGenShift  uint64 = 2
)

// outcome is what an RPC says about its peer.
type outcome uint8

const (
	// rpcOK: the peer answered (successfully or with an error of its own).
	rpcOK outcome = iota
	// rpcFailed: the peer was not reached or did not answer in time.
	rpcFailed
	// rpcNeutral: nothing is known about the peer (the caller left first,
	// or the client or connection was closed).
	rpcNeutral
)

// breakerTicket is the state a call was admitted in (see breaker.allow);
// its outcome is recorded against that state only.
type breakerTicket uint64

// A breaker is the circuit breaker of one peer:
//
//	closed --threshold consecutive failures--> open
//	open --cooldown elapsed, next call--> half-open (that call is the probe)
//	half-open --probe succeeds--> closed
//	half-open --probe fails--> open, with a fresh cooldown
//	half-open --probe says nothing (its caller left)--> open, cooldown
//	        already elapsed: the next call is the probe
//
// Any success while closed resets the failure count. The state and a
// generation, bumped on every transition, share one atomic word: a call
// admitted while closed costs an atomic load, and the outcome of a call
// admitted in an earlier generation (an RPC that was in flight while the
// circuit opened, say) is ignored. A nil *breaker is disabled: it admits
// every call.
type breaker struct {
	threshold int64
	cooldown  time.Duration
	now       func() time.Time
	// notify, if not nil, is called on a transition to open (fromClosed
	// tells a first opening from a failed probe) or to closed, with mu
	// held, until retire.
	notify func(open, fromClosed bool)

	st    atomic.Uint64 // generation<<circuitGenShift | state
	fails atomic.Int64  // consecutive failures in the current closed generation
	until atomic.Int64  // while open: end of the cooldown, Unix ns of now()

	mu      sync.Mutex // serializes transitions
	retired bool
}

// newBreaker returns a breaker that opens after threshold (> 0)
// consecutive failures and stays open for cooldown, measured by now.
func newBreaker(threshold int, cooldown time.Duration, now func() time.Time, notify func(open, fromClosed bool)) *breaker {
	return &breaker{threshold: int64(threshold), cooldown: cooldown, now: now, notify: notify}
}

// allow admits a call, returning the ticket to record its outcome with,
// or reports false when the circuit rejects it. The first call after the
// cooldown becomes the probe: its outcome must be recorded (rpcNeutral if
// nothing was learned), or the circuit stays half-open.
func (b *breaker) allow() (breakerTicket, bool) {
	if b == nil {
		return 0, true
	}
	s := b.st.Load()
	switch s & circuitStateMask {
	case circuitClosed:
		return breakerTicket(s), true
	case circuitHalfOpen:
		return 0, false
	}
	if b.now().UnixNano() < b.until.Load() {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s = b.st.Load()
	switch s & circuitStateMask {
	case circuitClosed:
		return breakerTicket(s), true
	case circuitOpen:
		if b.now().UnixNano() >= b.until.Load() {
			return breakerTicket(b.setLocked(s, circuitHalfOpen)), true
		}
	}
	return 0, false
}

// rejects reports whether a call would be rejected now, without admitting
// one (no probe is started): a cheap check before queueing a call.
func (b *breaker) rejects() bool {
	if b == nil {
		return false
	}
	switch b.st.Load() & circuitStateMask {
	case circuitClosed:
		return false
	case circuitHalfOpen:
		return true
	}
	return b.now().UnixNano() < b.until.Load()
}

// isOpen reports whether the circuit is open or half-open.
func (b *breaker) isOpen() bool {
	return b != nil && b.st.Load()&circuitStateMask != circuitClosed
}

// record records the outcome of a call admitted with t.
func (b *breaker) record(t breakerTicket, o outcome) {
	if b == nil {
		return
	}
	s := uint64(t)
	switch s & circuitStateMask {
	case circuitClosed:
		switch o {
		case rpcOK:
			if b.fails.Load() != 0 && b.st.Load() == s {
				b.fails.Store(0)
			}
		case rpcFailed:
			if b.st.Load() != s || b.fails.Add(1) < b.threshold {
				return
			}
			b.mu.Lock()
			if b.st.Load() == s {
				b.openLocked(s, true)
			}
			b.mu.Unlock()
		}
	case circuitHalfOpen:
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.st.Load() != s {
			return
		}
		switch o {
		case rpcOK:
			b.fails.Store(0)
			b.setLocked(s, circuitClosed)
			if b.notify != nil && !b.retired {
				b.notify(false, false)
			}
		case rpcFailed:
			b.openLocked(s, false)
		default:
			b.setLocked(s, circuitOpen) // until is past: the next call probes
		}
	}
}

// openLocked opens the circuit for a cooldown from now; s is the current
// state word.
func (b *breaker) openLocked(s uint64, fromClosed bool) {
	b.until.Store(b.now().Add(b.cooldown).UnixNano())
	b.setLocked(s, circuitOpen)
	if b.notify != nil && !b.retired {
		b.notify(true, fromClosed)
	}
}

// setLocked moves from state word s to state, in a new generation, and
// returns the new word.
func (b *breaker) setLocked(s, state uint64) uint64 {
	ns := ((s>>circuitGenShift)+1)<<circuitGenShift | state
	b.st.Store(ns)
	return ns
}

// retire stops notifications: once it returns, b reports no transition.
func (b *breaker) retire() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.retired = true
	b.mu.Unlock()
}

// rpcOutcome classifies an RPC's error for the breaker. Unavailable
// (which includes connection failures), network errors and
// DeadlineExceeded mean the peer was not reached or did not answer in
// time, except that DeadlineExceeded says nothing about the peer when
// callerDeadline reports that the RPC's deadline was its callers' rather
// than the client's Timeout. Canceled (the caller left, or the client or
// connection is closing) says nothing either. Any other error is the
// peer's answer.
func rpcOutcome(err error, callerDeadline bool) outcome {
	if err == nil {
		return rpcOK
	}
	code := status.Code(err)
	switch {
	case code == codes.Canceled || errors.Is(err, context.Canceled):
		return rpcNeutral
	case code == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded):
		if callerDeadline {
			return rpcNeutral
		}
		return rpcFailed
	case code == codes.Unavailable:
		return rpcFailed
	}
	if ne := net.Error(nil); errors.As(err, &ne) {
		return rpcFailed
	}
	return rpcOK
}

// directOutcome classifies the error of an unbatched RPC made with rctx,
// derived from the caller's ctx with the client's own timeout: whatever
// the error, it says nothing about the peer if ctx ended.
func directOutcome(ctx, rctx context.Context, err error) outcome {
	if err == nil {
		return rpcOK
	}
	if ctx.Err() != nil {
		return rpcNeutral
	}
	return rpcOutcome(err, callerDeadline(ctx, rctx))
}

// callerDeadline reports whether rctx, derived from ctx, has ctx's
// deadline: ctx's deadline came before the one rctx added.
func callerDeadline(ctx, rctx context.Context) bool {
	cdl, ok := ctx.Deadline()
	rdl, _ := rctx.Deadline()
	return ok && !cdl.After(rdl)
}
