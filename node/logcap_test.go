package node_test

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/node"
)

// lockedWriter is a bytes.Buffer safe for the node's concurrent logging.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *lockedWriter) count(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Count(w.buf.String(), s)
}

// Connections refused again and again past --max-conns (a flood like the
// issue's, which wrote 217,838 WARN lines in 5 s) write one line a second,
// the next with the number suppressed: the node logs through
// internal/logcap.
func TestRefusalLogsCapped(t *testing.T) {
	var logs lockedWriter
	n := startNode(t, func(c *node.Config) {
		c.Bounds.MaxConns = 1
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	held, err := net.Dial("tcp", n.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	const dials = 100
	start := time.Now()
	for range dials {
		c, err := net.Dial("tcp", n.GRPCAddr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a connection past MaxConns was served")
		}
		_ = c.Close()
	}
	elapsed := time.Since(start)
	got := logs.count("refused: grpc connections")
	if limit := int(elapsed/time.Second) + 1; got < 1 || got > limit {
		t.Fatalf("%d refusal lines for %d refusals in %s, want 1 to %d", got, dials, elapsed, limit)
	}
}
