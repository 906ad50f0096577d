package limiter_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// levelLog is a slog.Handler that keeps each record's level and message.
type levelLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *levelLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *levelLog) WithGroup(string) slog.Handler            { return h }
func (h *levelLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}

// levelOf returns the level of the first record whose message is msg.
func (h *levelLog) levelOf(msg string) (slog.Level, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Message == msg {
			return r.Level, true
		}
	}
	return 0, false
}

// A peer call refused because the caller is not (yet) in this node's ring
// (a rejoining node calls before every ring has it again) is logged at
// INFO, not WARN: it comes with normal churn, and
// sluice_peer_refused_total counts refusals that last.
func TestRefusedPeerCallLoggedAtInfo(t *testing.T) {
	h := &levelLog{}
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.Logger = slog.New(h) }, "n0", "n1")
	items := []limiter.Forwarded{{Hash: 42, Limit: tb(10, time.Hour), Cost: 1}}
	err := c.Node("n0").CheckForwarded(context.Background(), "rejoining", 1, items, make([]limiter.Answer, 1))
	if !errors.Is(err, limiter.ErrNotMember) {
		t.Fatalf("CheckForwarded from a stranger: %v, want ErrNotMember", err)
	}
	const msg = "peer call refused: the caller is not a member of this node's ring"
	if lvl, ok := h.levelOf(msg); !ok || lvl != slog.LevelInfo {
		t.Errorf("%q logged: %v at %v; want at INFO", msg, ok, lvl)
	}
}
