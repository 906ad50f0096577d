package logcap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Refusal is the attribute key that marks a record of a refusal path as
// capped whatever its level: slog.Bool(logcap.Refusal, true).
const Refusal = "refusal"

// SuppressedKey is the attribute of a line that passes after others of its
// reason were suppressed: how many were, since the last line written.
const SuppressedKey = "suppressed"

// OtherReason is the reason of every record whose message comes after
// MaxReasons distinct ones, so that the metrics' label cardinality stays
// bounded.
const OtherReason = "other"

// Defaults of Config.
const (
	DefaultEvery      = time.Second
	DefaultMaxReasons = 256
)

// ErrConfig wraps every invalid Config.
var ErrConfig = errors.New("logcap: invalid config")

// Config configures New.
type Config struct {
	// Every is the least time between two lines of one reason; 0 means
	// DefaultEvery.
	Every time.Duration
	// MaxReasons bounds the distinct reasons tracked and labelled; the
	// messages beyond share OtherReason. 0 means DefaultMaxReasons.
	MaxReasons int
	// Clock returns the current time; nil means time.Now.
	Clock func() time.Time
	// Registerer receives sluice_log_lines_total{level,reason} and
	// sluice_log_suppressed_total{reason}; nil registers nowhere.
	Registerer prometheus.Registerer
}

// Handler is the capping slog.Handler. Handlers derived by WithAttrs and
// WithGroup share their parent's caps and counters.
type Handler struct {
	next slog.Handler
	s    *state
}

type state struct {
	every time.Duration
	max   int
	clock func() time.Time
	lines *prometheus.CounterVec
	supp  *prometheus.CounterVec

	mu      sync.Mutex
	reasons map[string]*reason
}

type reason struct {
	last       time.Time // when the last line of this reason was written
	suppressed int64     // since then
}

// New wraps next.
func New(next slog.Handler, cfg Config) (*Handler, error) {
	switch {
	case next == nil:
		return nil, fmt.Errorf("%w: next: must not be nil", ErrConfig)
	case cfg.Every < 0:
		return nil, fmt.Errorf("%w: Every: must be >= 0 (0: %s), got %s", ErrConfig, DefaultEvery, cfg.Every)
	case cfg.MaxReasons < 0:
		return nil, fmt.Errorf("%w: MaxReasons: must be >= 0 (0: %d), got %d", ErrConfig, DefaultMaxReasons, cfg.MaxReasons)
	}
	s := &state{every: cfg.Every, max: cfg.MaxReasons, clock: cfg.Clock, reasons: map[string]*reason{},
		lines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_log_lines_total",
			Help: "Log records at WARN and above, and refusals, by level and reason (the message; \"other\" past the cap), written or suppressed."},
			[]string{"level", "reason"}),
		supp: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_log_suppressed_total",
			Help: "Log records not written because a line of their reason was written less than a second before."},
			[]string{"reason"}),
	}
	if s.every == 0 {
		s.every = DefaultEvery
	}
	if s.max == 0 {
		s.max = DefaultMaxReasons
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{s.lines, s.supp} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("logcap: register: %w", err)
			}
		}
	}
	return &Handler{next: next, s: s}, nil
}

// Enabled is next's.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle writes r through next unless it is capped and a line of its
// reason was written less than Every ago.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn && !refusal(r) {
		return h.next.Handle(ctx, r)
	}
	n, ok := h.s.admit(r.Level, r.Message)
	if !ok {
		return nil
	}
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64(SuppressedKey, n))
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs shares h's caps.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{next: h.next.WithAttrs(as), s: h.s}
}

// WithGroup shares h's caps.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), s: h.s}
}

// refusal reports whether r carries Refusal=true.
func refusal(r slog.Record) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == Refusal && a.Value.Kind() == slog.KindBool && a.Value.Bool() {
			found = true
			return false
		}
		return true
	})
	return found
}

// admit counts a record of msg and reports whether to write it, with the
// number of its reason suppressed since the last line written.
func (s *state) admit(level slog.Level, msg string) (int64, bool) {
	now := s.clock()
	s.mu.Lock()
	rs, ok := s.reasons[msg]
	if !ok {
		if len(s.reasons) >= s.max {
			msg = OtherReason
			rs = s.reasons[msg]
		}
		if rs == nil {
			rs = &reason{}
			s.reasons[msg] = rs
		}
	}
	write := rs.last.IsZero() || now.Sub(rs.last) >= s.every
	var n int64
	if write {
		n, rs.suppressed, rs.last = rs.suppressed, 0, now
	} else {
		rs.suppressed++
	}
	s.mu.Unlock()
	s.lines.WithLabelValues(level.String(), msg).Inc()
	if !write {
		s.supp.WithLabelValues(msg).Inc()
	}
	return n, write
}
