package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter/limitertest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// setClock moves c (see http_test.go) to t.
func setClock(c *limitertest.Clock, t time.Time) { c.Advance(t.Sub(c.Now())) }

// TestBreakerStateMachine walks a breaker (3 failures, 10s cooldown)
// through its transitions. Each step happens at a named time; "call X" is
// a call admitted and finished at once with outcome X, "begin A" admits a
// call and holds it as A, and "end A X" finishes held call A with outcome
// X.
func TestBreakerStateMachine(t *testing.T) {
	const cooldown = 10 * time.Second
	var (
		t0 = time.Unix(1_000_000, 0)
		t1 = t0.Add(time.Second)   // the failure that opens the circuit
		t2 = t1.Add(cooldown - 1)  // still cooling down
		t3 = t1.Add(cooldown)      // cooldown over: one probe
		t4 = t3.Add(cooldown - 1)  // the failed probe's fresh cooldown
		t5 = t3.Add(cooldown)      // second cooldown over
		t6 = t5.Add(time.Second)   // closed again
		t7 = t6.Add(time.Hour)     // a long quiet time changes nothing
		t8 = t7.Add(2 * cooldown)  // after the second opening
		t9 = t8.Add(10 * cooldown) // a long time open
	)
	type step struct {
		at       time.Time
		do       string
		admitted bool   // for call and begin
		open     bool   // isOpen after the step
		event    string // notification of the step, if any
	}
	steps := []step{
		{t0, "call fail", true, false, ""},
		{t0, "call fail", true, false, ""},
		{t0, "call ok", true, false, ""}, // resets the count
		{t0, "call fail", true, false, ""},
		{t0, "call neutral", true, false, ""}, // neither resets nor counts
		{t0, "call fail", true, false, ""},
		{t0, "begin stale", true, false, ""}, // admitted while closed
		{t1, "call fail", true, true, "opened"},
		{t1, "end stale ok", false, true, ""}, // an earlier generation's outcome is ignored
		{t1, "call fail", false, true, ""},    // rejected: open
		{t2, "call ok", false, true, ""},
		{t3, "begin probe", true, true, ""},
		{t3, "call ok", false, true, ""}, // one probe only
		{t3, "end probe fail", false, true, "reopened"},
		{t4, "call ok", false, true, ""}, // a fresh cooldown from t3
		{t5, "begin probe", true, true, ""},
		{t5, "end probe neutral", false, true, ""}, // nothing learned
		{t5, "begin probe", true, true, ""},        // so the next call probes at once
		{t5, "call ok", false, true, ""},
		{t5, "end probe ok", false, false, "closed"},
		{t6, "call fail", true, false, ""}, // the count restarted
		{t6, "call fail", true, false, ""},
		{t6, "call ok", true, false, ""},
		{t7, "call fail", true, false, ""},
		{t7, "call fail", true, false, ""},
		{t7, "call fail", true, true, "opened"},
		{t8, "call fail", true, true, "reopened"}, // the probe, finished at once
		{t9, "call ok", true, false, "closed"},
	}
	clk := limitertest.NewClock(t0)
	var events []string
	b := newBreaker(3, cooldown, clk.Now, func(open, fromClosed bool) {
		switch {
		case open && fromClosed:
			events = append(events, "opened")
		case open:
			events = append(events, "reopened")
		default:
			events = append(events, "closed")
		}
	})
	outcomes := map[string]outcome{"ok": rpcOK, "fail": rpcFailed, "neutral": rpcNeutral}
	held := map[string]breakerTicket{}
	for i, s := range steps {
		setClock(clk, s.at)
		name := fmt.Sprintf("step %d (%s at t0+%v)", i, s.do, s.at.Sub(t0))
		f := strings.Fields(s.do)
		events = events[:0]
		switch f[0] {
		case "call", "begin":
			if got := b.rejects(); got != !s.admitted {
				t.Errorf("%s: rejects() = %v before the call, want %v", name, got, !s.admitted)
			}
			tk, ok := b.allow()
			if ok != s.admitted {
				t.Fatalf("%s: admitted = %v, want %v", name, ok, s.admitted)
			}
			switch {
			case !ok: // a rejected call is not made and records nothing
			case f[0] == "call":
				b.record(tk, outcomes[f[1]])
			default:
				held[f[1]] = tk
			}
		case "end":
			b.record(held[f[1]], outcomes[f[2]])
			delete(held, f[1])
		}
		if got := b.isOpen(); got != s.open {
			t.Errorf("%s: isOpen = %v, want %v", name, got, s.open)
		}
		if got := strings.Join(events, ","); got != s.event {
			t.Errorf("%s: notified %q, want %q", name, got, s.event)
		}
	}
}

// TestBreakerOneProbe: of many concurrent calls after the cooldown,
// exactly one is admitted.
func TestBreakerOneProbe(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	clk := limitertest.NewClock(t0)
	b := newBreaker(1, time.Second, clk.Now, nil)
	tk, _ := b.allow()
	b.record(tk, rpcFailed)
	if !b.isOpen() {
		t.Fatal("one failure did not open a breaker with threshold 1")
	}
	clk.Advance(time.Second)
	const callers = 32
	var admitted atomic.Int32
	var probe atomic.Uint64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if tk, ok := b.allow(); ok {
				admitted.Add(1)
				probe.Store(uint64(tk))
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := admitted.Load(); n != 1 {
		t.Fatalf("%d calls admitted after the cooldown, want exactly 1", n)
	}
	b.record(breakerTicket(probe.Load()), rpcOK)
	if b.isOpen() {
		t.Error("a successful probe did not close the circuit")
	}
}

func TestBreakerNilIsDisabled(t *testing.T) {
	var b *breaker
	for range 10 {
		tk, ok := b.allow()
		if !ok || b.rejects() {
			t.Fatal("a nil breaker rejected a call")
		}
		b.record(tk, rpcFailed)
	}
	if b.isOpen() {
		t.Error("a nil breaker is open")
	}
	b.retire()
}

// TestBreakerRetiredIsSilent: after retire, transitions still happen but
// are not notified.
func TestBreakerRetiredIsSilent(t *testing.T) {
	clk := limitertest.NewClock(time.Unix(1_000_000, 0))
	notified := 0
	b := newBreaker(1, time.Second, clk.Now, func(bool, bool) { notified++ })
	b.retire()
	tk, _ := b.allow()
	b.record(tk, rpcFailed)
	if !b.isOpen() || notified != 0 {
		t.Errorf("retired breaker: open %v, %d notifications; want open, none", b.isOpen(), notified)
	}
}

func TestBreakerRPCOutcome(t *testing.T) {
	p := &peerConn{name: "p", addr: "127.0.0.1:1"}
	unavailable := status.Error(codes.Unavailable, "connection refused")
	for _, c := range []struct {
		name           string
		err            error
		callerDeadline bool
		want           outcome
	}{
		{"success", nil, false, rpcOK},
		{"unavailable", unavailable, false, rpcFailed},
		{"unavailable, caller deadline", unavailable, true, rpcFailed},
		{"wrapped unavailable", p.unavailable("Check", unavailable), false, rpcFailed},
		{"peer deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false, rpcFailed},
		{"caller deadline", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true, rpcNeutral},
		{"raw deadline", context.DeadlineExceeded, false, rpcFailed},
		{"canceled", status.Error(codes.Canceled, "context canceled"), false, rpcNeutral},
		{"raw canceled", context.Canceled, false, rpcNeutral},
		{"connection error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false, rpcFailed},
		{"resource exhausted", status.Error(codes.ResourceExhausted, "full"), false, rpcOK},
		{"invalid argument", status.Error(codes.InvalidArgument, "bad"), false, rpcOK},
		{"internal", status.Error(codes.Internal, "bug"), false, rpcOK},
	} {
		if got := rpcOutcome(c.err, c.callerDeadline); got != c.want {
			t.Errorf("%s: rpcOutcome = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestBreakerDirectOutcome(t *testing.T) {
	deadline := status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	bg := context.Background()

	// The client's timeout is the RPC's deadline: a slow peer.
	rctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	if got := directOutcome(bg, rctx, deadline); got != rpcFailed {
		t.Errorf("deadline of the client's timeout: %d, want rpcFailed", got)
	}
	// The caller's deadline came first.
	short, cancelShort := context.WithTimeout(bg, time.Second)
	defer cancelShort()
	rctx2, cancel2 := context.WithTimeout(short, time.Minute)
	defer cancel2()
	if got := directOutcome(short, rctx2, deadline); got != rpcNeutral {
		t.Errorf("deadline of the caller: %d, want rpcNeutral", got)
	}
	if got := directOutcome(short, rctx2, status.Error(codes.Unavailable, "x")); got != rpcFailed {
		t.Errorf("unavailable with a caller deadline: %d, want rpcFailed", got)
	}
	// The caller's ctx ended: nothing is learned, whatever the error.
	done, cancelDone := context.WithCancel(bg)
	cancelDone()
	rctx3, cancel3 := context.WithTimeout(done, time.Minute)
	defer cancel3()
	if got := directOutcome(done, rctx3, status.Error(codes.Unavailable, "x")); got != rpcNeutral {
		t.Errorf("caller cancelled: %d, want rpcNeutral", got)
	}
}
