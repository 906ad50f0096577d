package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// proc is a `sluice serve` process of a cluster.
type proc struct {
	*server
	name string
}

// startMember starts a cluster member named name, joining seeds.
func startMember(t *testing.T, name string, seeds ...string) *proc {
	t.Helper()
	args := []string{"--gossip-addr", freeAddr(t), "--log-level", "debug"}
	if len(seeds) > 0 {
		args = append(args, "--join", strings.Join(seeds, ","))
	}
	s := startServerNamed(t, name, args...)
	return &proc{server: s, name: name}
}

// members runs `sluice members --json` against p.
func members(t *testing.T, p *proc) []client.Member {
	t.Helper()
	code, out := sluice(t, "members", "--addr", p.grpc, "--json")
	if code != 0 {
		return nil
	}
	var resp struct {
		Members []client.Member `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("members --json: %v: %s", err, out)
	}
	return resp.Members
}

// waitMembers waits until every node of ps lists want members and its ring
// is made of exactly them: each has a share of it, and their shares add up
// to the whole. The member list follows gossip at once, the ring only once
// the membership has settled (cluster.Config.Settle); until every ring
// agrees, two nodes may each take a key for theirs.
func waitMembers(t *testing.T, d time.Duration, want int, ps ...*proc) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		ok := true
		for _, p := range ps {
			if !ringIs(members(t, p), want) {
				ok = false
				break
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			for _, p := range ps {
				t.Logf("%s sees %v", p.name, members(t, p))
			}
			t.Fatalf("not %d members on every node within %s", want, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ringIs reports whether ms has n members that make up the whole ring.
func ringIs(ms []client.Member, n int) bool {
	if len(ms) != n {
		return false
	}
	sum := 0.0
	for _, m := range ms {
		if m.RingShare <= 0 {
			return false
		}
		sum += m.RingShare
	}
	return sum > 0.999
}

// load sends checks of many keys through every given node until stopped,
// counting failures.
type load struct {
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	checks, fails atomic.Int64
	firstErr      atomic.Value
}

func startLoad(t *testing.T, addrs []string, workers int) *load {
	t.Helper()
	c, err := client.New(client.Config{Addrs: addrs, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			lim := client.Limit{Limit: 1_000_000, Period: time.Second}
			for i := 0; ctx.Err() == nil; i++ {
				res, err := c.Check(ctx, client.Item{Key: fmt.Sprintf("load:%d:%d", w, i%50), Limit: lim})
				if ctx.Err() != nil {
					return
				}
				l.checks.Add(1)
				if err == nil {
					err = res[0].Err
				}
				if err != nil {
					l.fails.Add(1)
					l.firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	t.Cleanup(func() { l.stop(); c.Close() })
	return l
}

func (l *load) stop() { l.cancel(); l.wg.Wait() }

func postCheck(t *testing.T, httpAddr, key string) int {
	t.Helper()
	resp, err := http.Post("http://"+httpAddr+"/v1/check", "application/json",
		strings.NewReader(`{"checks":[{"key":"`+key+`","limit":100,"period":"1h"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// keyUsage reads key's remaining units (limit 100/h) through the node at addr.
func keyUsage(t *testing.T, addr, key string) (remaining int64, owner string) {
	t.Helper()
	code, out := sluice(t, "usage", "--addr", addr, key, "--limit", "100", "--period", "1h", "--json")
	if code != 0 {
		t.Fatalf("usage %s: exit %d: %s", key, code, out)
	}
	var r struct {
		Remaining int64  `json:"remaining"`
		Owner     string `json:"owner"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return r.Remaining, r.Owner
}

// The cluster acceptance, with real processes on 127.0.0.1: three nodes
// join and list each other; one key's checks over all HTTP ports admit
// exactly the limit; a SIGTERM under load moves keys without failed checks
// and keeps counters; a fourth node joins under load and takes its share.
func TestProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	a := startMember(t, "a")
	b := startMember(t, "b", a.gossip)
	c := startMember(t, "c", a.gossip, b.gossip)
	took := waitMembers(t, 5*time.Second, 3, a, b, c)
	t.Logf("3 members listed by every node after %s", took)

	allowed := 0
	for i := 0; i < 300; i++ {
		switch code := postCheck(t, []*proc{a, b, c}[i%3].http, "exact-key"); code {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("check %d: HTTP %d", i, code)
		}
	}
	if allowed != 100 {
		t.Fatalf("300 checks over 3 nodes admitted %d, want exactly 100", allowed)
	}

	// Bring keys to 60/100.
	ks := make([]string, 60)
	for i := range ks {
		ks[i] = fmt.Sprintf("acct:%d", i)
		code, out := sluice(t, "check", "--addr", a.grpc, ks[i], "--limit", "100", "--period", "1h", "--cost", "60", "--json")
		if code != 0 {
			t.Fatalf("spend %s: exit %d %s", ks[i], code, out)
		}
	}

	// A fourth node joins under load: it takes about a quarter of the
	// keys, with their counters.
	ld := startLoad(t, []string{a.grpc, b.grpc, c.grpc}, 8)
	waitUntil(t, "load running", func() bool { return ld.checks.Load() > 200 })
	d := startMember(t, "d", a.gossip, b.gossip)
	waitMembers(t, 10*time.Second, 4, a, b, c, d)
	before := ld.checks.Load()
	waitUntil(t, "load after the join", func() bool { return ld.checks.Load() > before+500 })
	ld.stop()
	if f := ld.fails.Load(); f != 0 {
		t.Fatalf("%d of %d checks failed around the join; first: %v", f, ld.checks.Load(), ld.firstErr.Load())
	}
	onD, onC := 0, 0
	for _, k := range ks {
		rem, owner := keyUsage(t, a.grpc, k)
		switch owner {
		case "d":
			onD++
		case "c":
			onC++
		}
		if rem != 40 {
			t.Errorf("%s after d joined: remaining %d on %s, want 40", k, rem, owner)
		}
	}
	t.Logf("join under load: %d checks, none failed; node d took %d of %d keys", ld.checks.Load(), onD, len(ks))
	if onD < len(ks)/8 || onD > len(ks)/2 {
		t.Fatalf("node d took %d of %d keys, want about a quarter", onD, len(ks))
	}

	// SIGTERM one node under load: its keys move, no check fails, and the
	// counters are kept.
	if onC == 0 {
		t.Fatal("node c owns none of the keys")
	}
	ld2 := startLoad(t, []string{a.grpc, b.grpc, c.grpc, d.grpc}, 8)
	waitUntil(t, "load running", func() bool { return ld2.checks.Load() > 200 })
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
		if c.waitErr != nil {
			t.Fatalf("c after SIGTERM: %v\n%s", c.waitErr, c.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("c did not exit after SIGTERM\n%s", c.stderr)
	}
	waitMembers(t, 10*time.Second, 3, a, b, d)
	before = ld2.checks.Load()
	waitUntil(t, "load after the leave", func() bool { return ld2.checks.Load() > before+200 })
	ld2.stop()
	if f := ld2.fails.Load(); f != 0 {
		t.Fatalf("%d of %d checks failed around the SIGTERM; first: %v", f, ld2.checks.Load(), ld2.firstErr.Load())
	}
	t.Logf("SIGTERM under load: %d checks, none failed; %d of %d keys moved from c", ld2.checks.Load(), onC, len(ks))
	for _, k := range ks {
		if rem, owner := keyUsage(t, b.grpc, k); rem != 40 || owner == "c" {
			t.Errorf("%s after c left: remaining %d on %s, want 40 on a, b or d", k, rem, owner)
		}
	}
}

// checkJSON runs `sluice check --json` and returns its source and owner.
func checkJSON(t *testing.T, addr, key string) (code int, source, owner string, elapsed time.Duration) {
	t.Helper()
	start := time.Now()
	code, out := sluice(t, "check", "--addr", addr, key, "--limit", "1000", "--period", "1h", "--json")
	elapsed = time.Since(start)
	var r struct {
		Source string `json:"source"`
		Owner  string `json:"owner"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check --json: %v: %s", err, out)
	}
	return code, r.Source, r.Owner, elapsed
}

// kill -9 of a node: checks of its keys through the others are answered at
// once from the fallback, then by a new owner once the ring has moved.
func TestProcessKillFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	a := startMember(t, "a")
	b := startMember(t, "b", a.gossip)
	c := startMember(t, "c", a.gossip, b.gossip)
	waitMembers(t, 5*time.Second, 3, a, b, c)
	var onC []string
	for i := 0; len(onC) < 5; i++ {
		k := fmt.Sprintf("victim:%d", i)
		if _, _, owner, _ := checkJSON(t, a.grpc, k); owner == "c" {
			onC = append(onC, k)
		}
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.exited
	for _, k := range onC {
		code, source, owner, took := checkJSON(t, a.grpc, k)
		if code != 0 || source != "fallback" || owner != "c" {
			t.Fatalf("%s right after kill -9: exit %d source %q owner %q, want allowed from the fallback naming c", k, code, source, owner)
		}
		t.Logf("%s: fallback answer in %s (CLI process included)", k, took)
	}
	start := time.Now()
	// Each node learns of c's death on its own: wait until both a (which
	// answers the checks below) and b have dropped it.
	waitUntil(t, "the ring moves c's keys", func() bool {
		for _, addr := range []string{a.grpc, b.grpc} {
			if _, source, owner, _ := checkJSON(t, addr, onC[0]); source != "owner" || owner == "c" {
				return false
			}
		}
		return true
	})
	t.Logf("keys moved to a live owner %s after the kill", time.Since(start))
	for _, k := range onC {
		if _, source, owner, _ := checkJSON(t, a.grpc, k); source != "owner" || owner == "c" {
			t.Fatalf("%s after the ring moved: source %q owner %q", k, source, owner)
		}
	}
}
