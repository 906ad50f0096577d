package cluster

import (
	"bytes"
	"context"
	"errors"
	"log"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// A joiner's first snapshot lists a member its seed suspects: memberlist
// merges a seed's suspect entry only for a node it already knows, so the
// joiner contacts such a member itself (contactSuspects). The seed and the
// member here are plain memberlists that cannot reach each other (each
// sends the other nothing), with a suspicion timeout of minutes: the seed
// suspects the member for the whole test and the member never hears of it,
// so nothing but the joiner's own contact brings the member to the joiner.
func TestJoinListsAMemberTheSeedSuspects(t *testing.T) {
	meta, err := LocalConfig("joiner").Meta.encode(false)
	if err != nil {
		t.Fatal(err)
	}
	seed := startRawMember(t, "seed", meta)
	x := startRawMember(t, "x", meta)
	if _, err := x.ml.Join([]string{seed.addr}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "seed and x know each other", func() bool {
		return seed.ml.NumMembers() == 2 && x.ml.NumMembers() == 2
	})
	seed.cut.Store(&x.addr)
	x.cut.Store(&seed.addr)
	waitUntil(t, 10*time.Second, "the seed suspects x", func() bool { return seed.suspected("x") })

	var (
		mu    sync.Mutex
		snaps []Snapshot
	)
	cfg := LocalConfig("joiner")
	cfg.Join = []string{seed.addr}
	cfg.JoinRetry = 50 * time.Millisecond
	cfg.OnChange = func(s Snapshot) {
		mu.Lock()
		snaps = append(snaps, s)
		mu.Unlock()
	}
	j, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- j.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := j.Shutdown(); err != nil {
			t.Error(err)
		}
	}()

	var first Snapshot
	waitUntil(t, 10*time.Second, "the joiner delivers a snapshot with others", func() bool {
		mu.Lock()
		defer mu.Unlock()
		i := slices.IndexFunc(snaps, func(s Snapshot) bool { return len(s.Members) > 1 })
		if i >= 0 {
			first = snaps[i]
		}
		return i >= 0
	})
	var names []string
	for _, m := range first.Members {
		names = append(names, m.Name)
	}
	if want := []string{"joiner", "seed", "x"}; !slices.Equal(names, want) {
		t.Fatalf("the joiner's first snapshot after its join lists %v, want %v", names, want)
	}
	if !seed.suspected("x") {
		t.Fatal("the seed no longer suspects x: the test proves nothing")
	}
}

// rawMember is a plain memberlist (not a Cluster) advertising a Cluster's
// metadata, whose transport sends nothing (no packet, no stream) to the
// address in cut.
type rawMember struct {
	ml   *memberlist.Memberlist
	addr string
	cut  atomic.Pointer[string]

	mu  sync.Mutex
	log []byte
}

func startRawMember(t *testing.T, name string, meta []byte) *rawMember {
	t.Helper()
	r := &rawMember{}
	cfg := LocalConfig(name)
	mc := cfg.memberlistConfig()
	mc.SuspicionMult = 1000 // a suspect is declared dead after minutes
	mc.Delegate = rawDelegate{meta}
	mc.Logger = log.New(r, "", 0)
	mt, err := newMuteTransport(mc)
	if err != nil {
		t.Fatal(err)
	}
	mc.Transport = &cutTransport{muteTransport: mt, cut: &r.cut}
	if r.ml, err = memberlist.Create(mc); err != nil {
		_ = mt.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.ml.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	r.addr = addrString(r.ml.LocalNode().Addr, r.ml.LocalNode().Port)
	return r
}

// Write records memberlist's log.
func (r *rawMember) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, p...)
	return len(p), nil
}

// suspected reports whether memberlist logged that it suspects name.
func (r *rawMember) suspected(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.log, []byte("Suspect "+name+" has failed"))
}

// rawDelegate supplies a rawMember's metadata and nothing else.
type rawDelegate struct{ meta []byte }

func (d rawDelegate) NodeMeta(int) []byte               { return d.meta }
func (rawDelegate) NotifyMsg([]byte)                    {}
func (rawDelegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (rawDelegate) LocalState(bool) []byte              { return nil }
func (rawDelegate) MergeRemoteState(buf []byte, _ bool) {}

// cutTransport is a muteTransport that sends nothing to *cut.
type cutTransport struct {
	*muteTransport
	cut *atomic.Pointer[string]
}

var errCut = errors.New("cut by the test")

func (t *cutTransport) isCut(addr string) bool {
	c := t.cut.Load()
	return c != nil && *c == addr
}

func (t *cutTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.isCut(addr) {
		return time.Now(), nil
	}
	return t.muteTransport.WriteTo(b, addr)
}

func (t *cutTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

func (t *cutTransport) DialTimeout(addr string, d time.Duration) (net.Conn, error) {
	if t.isCut(addr) {
		return nil, errCut
	}
	return t.muteTransport.DialTimeout(addr, d)
}

func (t *cutTransport) DialAddressTimeout(a memberlist.Address, d time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, d)
}

// waitUntil polls cond every 10ms until it holds, failing the test after
// timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
