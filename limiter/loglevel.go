package limiter

import (
	"errors"
	"log/slog"
)

// churnLevel is the log level of a failed call to a peer that membership
// churn explains: INFO when the peer refused this node as not (yet) a
// member of its ring, or is leaving (a rejoin or a graceful departure, which
// the caller tries again or the ring settles), WARN for anything else (the
// peer unreachable, out of room), which an operator may have to act on.
func churnLevel(err error) slog.Level {
	if errors.Is(err, ErrNotMember) || errors.Is(err, ErrLeaving) {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
