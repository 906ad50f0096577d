package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// memberlistLog adapts memberlist's *log.Logger output to slog: each line,
// "[LEVEL] memberlist: message", becomes one record at slog.LevelDebug
// with memberlist's level in the "memberlist_level" attribute. memberlist
// logs routine churn (a peer going away, a refused connection) as [ERR]
// and [WARN], so those are not promoted to slog's levels.
//
// note, if not nil, sees every line first: it counts and logs at WARN the
// gossip refused for its key (Cluster.noteMemberlistLine).
type memberlistLog struct {
	logger *slog.Logger
	note   func([]byte)
}

// newMemberlistLogger returns the *log.Logger to give memberlist.
func newMemberlistLogger(l *slog.Logger, note func([]byte)) *log.Logger {
	return log.New(memberlistLog{logger: l, note: note}, "", 0)
}

// Write implements io.Writer; log.Logger calls it once per line.
func (w memberlistLog) Write(p []byte) (int, error) {
	if w.note != nil {
		w.note(p)
	}
	if !w.logger.Enabled(context.Background(), slog.LevelDebug) {
		return len(p), nil
	}
	line := bytes.TrimRight(p, "\n")
	level := "INFO"
	if len(line) > 0 && line[0] == '[' {
		if end := bytes.IndexByte(line, ']'); end > 0 {
			level = string(line[1:end])
			line = bytes.TrimLeft(line[end+1:], " ")
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	w.logger.LogAttrs(context.Background(), slog.LevelDebug, string(line),
		slog.String("memberlist_level", level))
	return len(p), nil
}
