package node_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
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

// A caller refused by the peer service again and again (the issue's
// 217,838 WARN lines in 5 s) writes one line a second, the next with the
// number suppressed: the node logs through internal/logcap.
func TestRefusalLogsCapped(t *testing.T) {
	p := newPKI(t)
	peerOfPublic := p.public.PeerAndServer(t, "node", "sluice-peer")
	cert, key := testcerts.WritePair(t, t.TempDir(), "peer", peerOfPublic)
	var logs lockedWriter
	n := startNode(t, func(c *node.Config) {
		c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = cert, key, p.pubCA
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	c := peerConn(t, n.PeerAddr(), testcerts.ClientConfig(t, p.public.PEM, &p.client))
	const calls = 200
	start := time.Now()
	for range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Fetch(ctx, &sluicev1.FetchRequest{From: "n0", Hashes: []uint64{1}})
		cancel()
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Fetch: %v, want PermissionDenied", err)
		}
	}
	elapsed := time.Since(start)
	got := logs.count("caller refused")
	if limit := int(elapsed/time.Second) + 1; got < 1 || got > limit {
		t.Fatalf("%d refusal lines for %d refusals in %s, want 1 to %d", got, calls, elapsed, limit)
	}
}
