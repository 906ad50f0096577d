package middleware

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// errorLog is the default OnError: it logs each request Sluice could not
// decide and what was done with it, at most one line a second per reason
// (the error's gRPC code and rule), each line counting the requests of
// its reason that were not logged since the last. A misconfigured rule
// (ErrRuleRejected) is logged at ERROR, the rest at WARN.
type errorLog struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	reasons map[string]*reasonLog // bounded: gRPC codes × the rules
}

// reasonLog is one reason's rate limit.
type reasonLog struct {
	last       time.Time // when a line was last logged; zero: never
	suppressed int64     // requests not logged since
}

// errorLogEvery is the interval of one reason's lines.
const errorLogEvery = time.Second

func newErrorLog(log *slog.Logger) *errorLog {
	if log == nil {
		log = slog.Default()
	}
	return &errorLog{log: log, now: time.Now, reasons: make(map[string]*reasonLog)}
}

// report logs d's error for a request to target (a method or a path),
// unless a line of its reason was logged less than a second ago.
func (e *errorLog) report(ctx context.Context, target string, d *decision) {
	e.mu.Lock()
	now := e.now()
	r := e.reasons[d.reason]
	if r == nil {
		r = &reasonLog{}
		e.reasons[d.reason] = r
	}
	if !r.last.IsZero() && now.Sub(r.last) < errorLogEvery {
		r.suppressed++
		e.mu.Unlock()
		return
	}
	suppressed := r.suppressed
	r.last, r.suppressed = now, 0
	e.mu.Unlock()
	e.log.LogAttrs(ctx, d.level(), "sluice middleware: Sluice did not decide a request",
		slog.String("action", d.action()), slog.String("target", target),
		slog.String("error", d.err.Error()), slog.Int64("suppressed", suppressed))
}
