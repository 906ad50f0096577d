package transport

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluice-rl/sluice/internal/clustersecret"
)

// raftDropped returns sluice_peer_raft_dropped_total{reason} of reg.
func raftDropped(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_peer_raft_dropped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// msgs returns n messages "<prefix>-<i>" for i from start.
func msgs(prefix string, start, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s-%d", prefix, start+i)
	}
	return out
}

// Two nodes send to a third over peer mTLS: each one's messages arrive
// complete and in the order sent, whatever the batching.
func TestRaftSenderInOrderPerPeer(t *testing.T) {
	pki := newRaftPKI(t)
	rec := newRaftRecorder("a", "c")
	addr, _, _ := startRaftPeer(t, "b", rec, pki.peer(t, "b"))
	const n = 3000
	var unreachable sync.Map
	report := func(to string) { unreachable.Store(to, true) }
	var wg sync.WaitGroup
	for _, self := range []string{"a", "c"} {
		s, _ := newTestRaftSender(t, self, dialCreds(pki.peer(t, self)), RaftSenderConfig{QueueLen: n, Unreachable: report})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; {
				k := min(1+i%7, n-i) // Sends of 1 to 7 messages
				s.Send("b", addr, msgs(self, i, k))
				i += k
			}
		}()
	}
	wg.Wait()
	waitFor(t, "every message stepped", func() bool { return rec.total() == 2*n })
	for _, self := range []string{"a", "c"} {
		got := rec.from(self)
		for i, m := range got {
			if want := fmt.Sprintf("%s-%d", self, i); m != want {
				t.Fatalf("%s's message %d is %q, want %q", self, i, m, want)
			}
		}
	}
	unreachable.Range(func(k, _ any) bool {
		t.Errorf("Unreachable(%v) called for a reachable peer", k)
		return true
	})
}

// hangingPeer accepts connections and never answers: a peer whose
// handshake never ends. Its connections are closed at the test's end.
func hangingPeer(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return lis.Addr().String()
}

// A peer that never answers holds its sender goroutine: Send still
// returns at once, and what does not fit the queue is dropped and counted.
func TestRaftSenderFullQueueDrops(t *testing.T) {
	pki := newRaftPKI(t)
	const queue = 8
	s, reg := newTestRaftSender(t, "a", dialCreds(pki.peer(t, "a")), RaftSenderConfig{QueueLen: queue})
	addr := hangingPeer(t)
	// More than the queue and a batch the goroutine may have taken out.
	const total = queue + MaxRaftBatch + 50
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range total {
			s.Send("b", addr, msgs("a", i, 1))
		}
	}()
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("Send blocked on a peer that does not answer")
	}
	dropped := raftDropped(t, reg, "queue_full")
	if dropped < total-queue-MaxRaftBatch {
		t.Fatalf("dropped %v of %d messages, want at least %d", dropped, total, total-queue-MaxRaftBatch)
	}
	if st := s.cfg.Peers.m.Snapshot(); float64(st.RaftDropped) != dropped || st.RaftSent != 0 {
		t.Fatalf("snapshot %+v, want RaftDropped %v and nothing sent", st, dropped)
	}
}

// A peer that cannot be reached is reported; messages to it are dropped
// and counted; a new address for it is used by its next stream, and its
// messages arrive again.
func TestRaftSenderUnreachableThenMoved(t *testing.T) {
	pki := newRaftPKI(t)
	reported := make(chan string, 100)
	s, reg := newTestRaftSender(t, "a", dialCreds(pki.peer(t, "a")), RaftSenderConfig{Unreachable: func(to string) {
		select {
		case reported <- to:
		default:
		}
	}})
	s.Send("b", closedAddr(t), msgs("a", 0, 3))
	select {
	case to := <-reported:
		if to != "b" {
			t.Fatalf("Unreachable(%q), want b", to)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no Unreachable for a closed port")
	}
	waitFor(t, "3 drops counted", func() bool { return raftDropped(t, reg, "unreachable") == 3 })

	rec := newRaftRecorder("a")
	addr, _, _ := startRaftPeer(t, "b", rec, pki.peer(t, "b"))
	s.Send("b", addr, msgs("a", 3, 2))
	waitFor(t, "messages at the new address", func() bool { return len(rec.from("a")) == 2 })
	if got := rec.from("a"); got[0] != "a-3" || got[1] != "a-4" {
		t.Fatalf("stepped %q, want a-3, a-4", got)
	}
}

// A peer that refuses this node (PermissionDenied) ends the stream; the
// next send reports it unreachable rather than sending into a dead stream
// for ever.
func TestRaftSenderRefusedIsReported(t *testing.T) {
	pki := newRaftPKI(t)
	rec := newRaftRecorder("someone-else")
	addr, _, _ := startRaftPeer(t, "b", rec, pki.peer(t, "b"))
	reported := make(chan string, 100)
	s, _ := newTestRaftSender(t, "a", dialCreds(pki.peer(t, "a")), RaftSenderConfig{Unreachable: func(to string) {
		select {
		case reported <- to:
		default:
		}
	}})
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		s.Send("b", addr, msgs("a", i, 1))
		select {
		case <-reported:
			if n := rec.total(); n != 0 {
				t.Fatalf("receiver stepped %d messages of a refused sender", n)
			}
			return
		case <-deadline:
			t.Fatal("a refused sender was never reported")
		case <-time.After(10 * time.Millisecond): // the next Send's pace, not a condition
		}
	}
}

// Close stops every peer's goroutine, whether its peer answers, never
// answers, or is not there; Sends after Close are dropped.
func TestRaftSenderCloseStopsGoroutines(t *testing.T) {
	pki := newRaftPKI(t)
	hanging, gone := hangingPeer(t), closedAddr(t)
	before := goleak.IgnoreCurrent()
	rec := newRaftRecorder()
	addr, _, gs := startRaftPeer(t, "b", rec, pki.peer(t, "b"))
	reg := prometheus.NewRegistry()
	pm, err := NewPeerMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := NewPeerClient(PeerClientConfig{Self: "a", Metrics: pm, DialOptions: []grpc.DialOption{dialCreds(pki.peer(t, "a"))}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewRaftSender(RaftSenderConfig{Peers: pc})
	if err != nil {
		t.Fatal(err)
	}
	s.Send("b", addr, msgs("a", 0, 10))
	s.Send("hang", hanging, msgs("a", 0, 10))
	s.Send("gone", gone, msgs("a", 0, 10))
	waitFor(t, "b's messages", func() bool { return rec.total() == 10 })

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.Close()
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	s.Send("b", addr, msgs("a", 10, 2))
	if got := raftDropped(t, reg, "closed"); got < 2 {
		t.Fatalf("dropped (closed) = %v, want at least the 2 sent after Close", got)
	}
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	gs.Stop()
	goleak.VerifyNone(t, before)
}

func TestNewRaftSenderBadConfig(t *testing.T) {
	pc := newTestPeerClient(t, PeerClientConfig{Self: "a"})
	for _, tc := range []struct {
		cfg   RaftSenderConfig
		field string
	}{
		{RaftSenderConfig{}, "Peers"},
		{RaftSenderConfig{Peers: pc, QueueLen: -1}, "QueueLen"},
		{RaftSenderConfig{Peers: pc, QueueBytes: -1}, "QueueBytes"},
	} {
		_, err := NewRaftSender(tc.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "RaftSenderConfig."+tc.field) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
	}
}

// writeClusterSecret writes a new cluster secret file in dir and loads it.
func writeClusterSecret(t *testing.T, dir, name string) *clustersecret.Source {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := clustersecret.NewSource(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// With a cluster secret instead of peer certificates, as a node has it
// (the secret's TLS on the peer port): a holder of the secret is heard, a
// node of another secret is reported unreachable and never stepped.
func TestRaftSenderOverClusterSecret(t *testing.T) {
	dir := t.TempDir()
	secret, other := writeClusterSecret(t, dir, "ours"), writeClusterSecret(t, dir, "theirs")
	rec := newRaftRecorder("a", "x")
	addr, _, _ := serveRaftPeer(t, "b", rec, grpc.Creds(credentials.NewTLS(secret.ServerConfig())))

	s, _ := newTestRaftSender(t, "a", grpc.WithTransportCredentials(secret.ClientCredentials()), RaftSenderConfig{})
	s.Send("b", addr, msgs("a", 0, 3))
	waitFor(t, "a's messages", func() bool { return len(rec.from("a")) == 3 })

	reported := make(chan string, 10)
	x, reg := newTestRaftSender(t, "x", grpc.WithTransportCredentials(other.ClientCredentials()), RaftSenderConfig{Unreachable: func(to string) {
		select {
		case reported <- to:
		default:
		}
	}})
	x.Send("b", addr, msgs("x", 0, 3))
	select {
	case <-reported:
	case <-time.After(10 * time.Second):
		t.Fatal("a node of another secret was never reported unreachable")
	}
	waitFor(t, "x's drops counted", func() bool { return raftDropped(t, reg, "unreachable") == 3 })
	if got := rec.from("x"); len(got) != 0 {
		t.Fatalf("stepped %q from a node of another secret", got)
	}
}
