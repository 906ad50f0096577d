package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/store"
)

// A leaving node decides nothing for others. n0 owns the keys and leaves:
// its ring is n1 and n2, and it hands the keys to n1, whose ring still has
// n0 (it has not seen the leave yet). While that push is in flight, a
// check through n2, whose ring has seen the leave, goes to n1, which sends
// it on to n0, the keys' owner by its ring, with its hops spent. n0 must
// send it back to n1, the owner by its own ring, which fetches the state
// in transit from n0 and decides it. Were n0 to decide it, it would find
// nothing in its store nor at n1 and count the key afresh, and the count
// would leave with it. As the fault test saw it in graceful restarts (the
// leaving node took the state back from its new owner then).
func TestLeavingNodeDecidesNothingForOthers(t *testing.T) {
	all := []string{"n0", "n1", "n2"}
	rest := []string{"n1", "n2"}
	calc := limitertest.NewCluster(t, nil, all...)
	calc.SetRing("n1", rest...)
	ks := keysOwnedOnRings(t, calc, "n0", "n1") // by all three, and by n1 and n2

	c := limitertest.NewCluster(t, nil, all...)
	spend(t, c, "n0", ks, hourly, 60)
	c.SetRing("n2", rest...)
	c.Net.BeforeHandoff("n0", "n1", func() {
		for _, k := range ks {
			res := c.Check("n2", limiter.Request{Key: k, Limit: hourly, Cost: 10})[0]
			if !res.Allowed || res.Remaining != 30 || res.Source != limiter.SourceOwner || res.Owner != "n1" {
				t.Errorf("%s through n2 while n0 hands it off: %+v, want allowed by n1 with 30 left", k, res)
			}
		}
	})
	if err := c.Leave("n0", rest...); err != nil {
		t.Fatalf("n0: Leave: %v", err)
	}
	if got := c.Net.Calls("n1", "n0").Check; got == 0 {
		t.Fatal("n1 sent no check to n0")
	}
	c.Remove("n0")
	c.SetRing("n1", rest...)
	if bad := remainingOrFallback(t, c, "n2", ks, hourly, 30, false); len(bad) > 0 {
		t.Fatalf("%d of %d keys lost their counter once n0 had left, e.g. %s", len(bad), len(ks), bad[0])
	}
}

// A key whose ring moves it while its owner waits for its state is decided
// by its new owner. a has just joined and owns the key, which nobody has
// spent yet: a check of it waits for a's fetch from the others. Meanwhile
// e joins, takes the key, and a hands off (nothing of the key) and
// acknowledges the partition to e. Deciding the check on the ring it began
// with, a would count the key here, where e, which will not ask a for it,
// would never see it: the key would admit its limit again on e.
func TestKeyMovedWhileFetchedIsDecidedByItsNewOwner(t *testing.T) {
	r0 := []string{"b", "c", "d"}
	r1 := []string{"a", "b", "c", "d"}
	r2 := []string{"a", "b", "c", "d", "e"}
	calc := limitertest.NewCluster(t, nil, "a", "e")
	calc.SetRing("a", r1...)
	calc.SetRing("e", r2...)
	key := calc.KeysOwnedBy("a", "a", "m", limiter.Request{Limit: hourly}, 200)
	var k string
	for _, cand := range key {
		if calc.Owner("e", limiter.Request{Key: cand, Limit: hourly}) == "e" {
			k = cand
			break
		}
	}
	if k == "" {
		t.Fatal("no key owned by a on four nodes and by e on five")
	}

	c := limitertest.NewCluster(t, nil, r0...)
	c.Add("a")
	for _, n := range r1 {
		c.SetRing(n, r1...)
	}
	var once sync.Once
	for _, h := range r0 {
		c.Net.AfterFetch("a", h, func() {
			once.Do(func() {
				c.Add("e")
				for _, n := range r2 {
					c.SetRing(n, r2...)
				}
				if _, err := c.HandOff("a"); err != nil {
					t.Errorf("a: HandOff: %v", err)
				}
			})
		})
	}
	first := c.Check("a", limiter.Request{Key: k, Limit: hourly, Cost: 60})[0]
	if !first.Allowed || first.Remaining != 40 || first.Owner != "e" {
		t.Errorf("the check that waited for the key's state: %+v, want allowed by e with 40 left", first)
	}
	if got := admitted(c, "b", k, 100); got != 40 {
		t.Errorf("admitted %d more through b, want 40", got)
	}
}

// A key given to a fetching node and handed back is decided here again.
// n1 owns the key on its ring, which n0 has left; n0, fetching on the ring
// it had before it left, takes the key from n1 (which sends the key's
// checks to n0 from then on) and, its ring having moved on, hands it back.
// Once n0 has gone, n1 must decide the key on the state it holds, not send
// its checks to n0 and have them answered by the key's heir.
func TestKeyHandedBackAfterAFetchIsDecidedHere(t *testing.T) {
	all := []string{"n0", "n1", "n2"}
	rest := []string{"n1", "n2"}
	calc := limitertest.NewCluster(t, nil, all...)
	calc.SetRing("n1", rest...)
	ks := keysOwnedOnRings(t, calc, "n0", "n1") // by all three, and by n1 and n2

	c := limitertest.NewCluster(t, nil, all...)
	spend(t, c, "n0", ks, hourly, 60)
	c.SetRing("n1", rest...)
	c.SetRing("n2", rest...)
	if err := c.Leave("n0", rest...); err != nil {
		t.Fatalf("n0: Leave: %v", err)
	}
	ctx := context.Background()
	hashes := make([]uint64, len(ks))
	for i, k := range ks {
		hashes[i] = identity.Inline(uint8(hourly.Algorithm), hourly.Period, k)
	}
	got, err := c.Node("n1").FetchMoved(ctx, "n0", hashes)
	if err != nil || len(got) != len(ks) {
		t.Fatalf("n0 fetching from n1: %d states, %v; want %d", len(got), err, len(ks))
	}
	if _, err := c.Node("n1").AcceptHandoff(ctx, "n0", got, nil); err != nil {
		t.Fatalf("n0 handing them back to n1: %v", err)
	}
	c.Remove("n0")
	for _, k := range ks {
		res := c.Check("n1", limiter.Request{Key: k, Limit: hourly, Cost: 1})[0]
		if !res.Allowed || res.Remaining != 39 || res.Source != limiter.SourceOwner || res.Owner != "n1" {
			t.Errorf("%s through n1 once n0 had gone: %+v, want allowed by n1 with 39 left", k, res)
		}
	}
}

// A key whose ring moves it between its route and its take is decided by
// its new owner. n0 routes a check of a key it owns to itself; before it
// takes, its ring gains n3, which owns the key there, and n0 hands the key
// off. Taking on its store then would count the key afresh on n0 (the
// fault test's graceful restarts: two checks waited on the shard lock
// behind the handoff's extract, then counted from nothing).
func TestKeyMovedBeforeItsTakeIsDecidedByItsNewOwner(t *testing.T) {
	old := []string{"n0", "n1", "n2"}
	all := []string{"n0", "n1", "n2", "n3"}
	calc := limitertest.NewCluster(t, nil, all...)
	calc.SetRing("n0", old...)
	ks := keysOwnedOnRings(t, calc, "n0", "n3") // by three, and by four

	c := limitertest.NewCluster(t, nil, old...)
	spend(t, c, "n0", ks, hourly, 60)
	c.Add("n3")
	n0 := c.Node("n0")
	var once sync.Once
	limiter.SetBeforeTake(func(l *limiter.Limiter) {
		if l != n0 {
			return
		}
		once.Do(func() {
			for _, n := range all {
				c.SetRing(n, all...)
			}
			if _, err := c.HandOff("n0"); err != nil {
				t.Errorf("n0: HandOff: %v", err)
			}
		})
	})
	defer limiter.SetBeforeTake(nil)
	res := c.Check("n0", limiter.Request{Key: ks[0], Limit: hourly, Cost: 10})[0]
	if !res.Allowed || res.Remaining != 30 || res.Source != limiter.SourceOwner || res.Owner != "n3" {
		t.Errorf("%s through n0 while its ring moved it: %+v, want allowed by n3 with 30 left", ks[0], res)
	}
	limiter.SetBeforeTake(nil)
	if bad := remainingOrFallback(t, c, "n1", ks[:1], hourly, 30, false); len(bad) > 0 {
		t.Fatalf("after the move: %v", bad)
	}
}

// An owner that holds a key's state, spent, and cannot hear in time from a
// node that may hold more of it, denies the key's checks: its failure mode
// does not admit from a local share a key it knows to be spent. n0 owns
// the key and has spent it; n3, which n0's ring does not have yet, pushes
// it a state of the key, which n0 refuses and so awaits from n3 once its
// ring has n3. n3 then answers too late. As the fault test saw it in a
// join (a holder's fetch timed out, and the owner admitted one more).
func TestSpentKeyDeniedWhileAHolderIsSlow(t *testing.T) {
	old := []string{"n0", "n1", "n2"}
	all := []string{"n0", "n1", "n2", "n3"}
	calc := limitertest.NewCluster(t, nil, all...)
	calc.SetRing("n0", old...)
	ks := keysOwnedOnRings(t, calc, "n0", "n0") // by three, and by four

	c := limitertest.NewCluster(t, nil, old...)
	spend(t, c, "n0", ks[:1], hourly, 100)
	c.Add("n3")
	ctx := context.Background()
	state := store.Entry{Key: identity.Inline(uint8(hourly.Algorithm), hourly.Period, ks[0]), Algorithm: hourly.Algorithm,
		Token: bucket.TokenState{TAT: c.Clock.Now().UnixNano()}}
	if _, err := c.Node("n0").AcceptHandoff(ctx, "n3", []store.Entry{state}, nil); !errors.Is(err, limiter.ErrNotMember) {
		t.Fatalf("n3's push to n0, whose ring lacks it: %v, want ErrNotMember", err)
	}
	for _, n := range all {
		c.SetRing(n, all...)
	}
	c.Net.Delay("n0", "n3", 10*time.Second) // n0's fetch from n3 ends at its fetch timeout
	res := c.Check("n0", limiter.Request{Key: ks[0], Limit: hourly, Cost: 1})[0]
	if res.Allowed || res.Err != nil {
		t.Errorf("%s, spent, while n3 does not answer: %+v, want denied", ks[0], res)
	}
	if got := c.Net.Calls("n0", "n3").Fetch; got != 0 {
		t.Errorf("%d fetches reached n3, want none (it answers too late)", got)
	}
}

// The state a fetch brought for a key that the ring moved meanwhile goes
// to the key's new owner even if the check's caller has given up: it is
// the key's count, not the check's. a has just joined and fetches a key
// that b spent; meanwhile e joins and takes the key, a hands off (nothing
// of the key yet) and acknowledges the partition to e, and the check's
// context ends. Passing the state on under the check's context would fail
// and leave it on a, where e will not look: e would count the key afresh.
func TestKeyFetchedForACancelledCheckStillGoesToItsNewOwner(t *testing.T) {
	r0 := []string{"b", "c", "d"}
	r1 := []string{"a", "b", "c", "d"}
	r2 := []string{"a", "b", "c", "d", "e"}
	calc := limitertest.NewCluster(t, nil, "a", "b", "e")
	calc.SetRing("a", r0...)
	calc.SetRing("b", r1...)
	calc.SetRing("e", r2...)
	var ks []string
	for i := 0; len(ks) == 0 && i < 100000; i++ {
		k := fmt.Sprintf("f:%d", i)
		req := limiter.Request{Key: k, Limit: hourly}
		if calc.Owner("a", req) == "b" && calc.Owner("b", req) == "a" && calc.Owner("e", req) == "e" {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		t.Fatal("no key owned by b on three nodes, a on four and e on five")
	}
	k := ks[0]

	c := limitertest.NewCluster(t, nil, r0...)
	spend(t, c, "b", []string{k}, hourly, 60)
	c.Add("a")
	for _, n := range r1 {
		c.SetRing(n, r1...) // b does not hand off: a fetches the key
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Net.AfterFetch("a", "b", func() {
		c.Add("e")
		for _, n := range r2 {
			c.SetRing(n, r2...)
		}
		if _, err := c.HandOff("a"); err != nil {
			t.Errorf("a: HandOff: %v", err)
		}
		cancel() // the caller gives up
	})
	if _, err := c.Node("a").Check(ctx, []limiter.Request{{Key: k, Limit: hourly, Cost: 1}}, nil); err != nil {
		t.Logf("the check whose caller gave up: %v", err)
	}
	if got := c.Net.Calls("a", "b").Fetch; got == 0 {
		t.Fatal("a never fetched the key from b")
	}
	res := c.Check("c", limiter.Request{Key: k, Limit: hourly})[0]
	if res.Owner != "e" || res.Remaining > 40 {
		t.Errorf("%s once e owns it: %+v, want e with at most 40 left (60 spent)", k, res)
	}
}

// A leaving node made to decide a check for a key it does not own (its
// hop budget spent past leavingHops, say by a node whose ring still names
// it) does not fetch the key's state from its owner to decide it: the
// state would leave with it, and the owner count the key afresh. It
// answers that the state is elsewhere, so the sender falls back. As the
// fault test saw it in a graceful leave: the leaving node, its handoff
// done, took a key back from its new owner, which then admitted 2 from
// nothing.
func TestLeavingNodeFetchesNothingBack(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	k := c.KeysOwnedBy("n1", "n1", "back", limiter.Request{Limit: hourly}, 1)[0]
	spend(t, c, "n1", []string{k}, hourly, 60)
	c.SetRing("n0", "n1", "n2") // n0 is leaving
	hash := identity.Inline(uint8(hourly.Algorithm), hourly.Period, k)
	out := make([]limiter.Answer, 1)
	items := []limiter.Forwarded{{Hash: hash, Limit: hourly, Cost: 10}}
	if err := c.Node("n0").CheckForwarded(context.Background(), "n2", 8, items, out); err != nil {
		t.Fatalf("n0: CheckForwarded: %v", err)
	}
	if out[0].Allowed || !errors.Is(out[0].Err, limiter.ErrStateElsewhere) {
		t.Errorf("n0, leaving, deciding %s for n2: %+v, want not allowed, ErrStateElsewhere", k, out[0])
	}
	if got := c.Net.Calls("n0", "n1").Fetch; got != 0 {
		t.Errorf("n0, leaving, fetched %s from its owner n1 %d times, want 0", k, got)
	}
	if res := c.Check("n1", limiter.Request{Key: k, Limit: hourly, Cost: 10})[0]; !res.Allowed || res.Remaining != 30 {
		t.Errorf("%s on its owner n1 after: %+v, want allowed with 30 left (70 of 100 used)", k, res)
	}
}

// A key fetched away between its route and its take is decided by the
// node that fetched it, not counted afresh here on an empty store. n0 owns
// the key by its ring and has spent 60; n1, whose ring gives it the key (a
// node joined that n0 has not seen yet), fetches it and spends 10 while a
// check on n0 is between its route and its take.
func TestKeyFetchedAwayBeforeItsTakeIsDecidedByTheFetcher(t *testing.T) {
	calc := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	calc.SetRing("n0", "n0", "n1")
	ks := keysOwnedOnRings(t, calc, "n0", "n1") // by n0 and n1, and by all three

	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	c.SetRing("n0", "n0", "n1")
	c.SetRing("n1", "n0", "n1")
	spend(t, c, "n0", ks[:1], hourly, 60)
	c.SetRing("n1", "n0", "n1", "n2")
	n0 := c.Node("n0")
	var once sync.Once
	limiter.SetBeforeTake(func(l *limiter.Limiter) {
		if l != n0 {
			return
		}
		once.Do(func() {
			res := c.Check("n1", limiter.Request{Key: ks[0], Limit: hourly, Cost: 10})[0]
			if !res.Allowed || res.Remaining != 30 || res.Owner != "n1" {
				t.Errorf("%s through n1, fetching it from n0: %+v, want allowed by n1 with 30 left", ks[0], res)
			}
		})
	})
	defer limiter.SetBeforeTake(nil)
	res := c.Check("n0", limiter.Request{Key: ks[0], Limit: hourly, Cost: 10})[0]
	if !res.Allowed || res.Remaining != 20 || res.Owner != "n1" {
		t.Errorf("%s through n0 while n1 fetched it: %+v, want allowed by n1 with 20 left", ks[0], res)
	}
}
