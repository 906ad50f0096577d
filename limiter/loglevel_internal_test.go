package limiter

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
)

// A peer's refusal that churn explains (not a member yet, leaving) is
// INFO; any other failure of a peer call stays WARN.
func TestChurnLevel(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want slog.Level
	}{
		{fmt.Errorf("handoff: %w", ErrNotMember), slog.LevelInfo},
		{fmt.Errorf("handoff: %w", ErrLeaving), slog.LevelInfo},
		{errors.New("connection refused"), slog.LevelWarn},
	} {
		if got := churnLevel(tc.err); got != tc.want {
			t.Errorf("churnLevel(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
