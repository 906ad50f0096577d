package limiter_test

import (
	"testing"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// Three nodes start together and b has not applied the epoch that adds c
// yet: its ring is {a, b} (epoch 1) while a's and c's are {a, b, c}
// (epoch 2). Keys that c owns on the full ring are b's on b's ring.
// Checks of them through every node must not be counted by both b
// (afresh, on its ring) and c: a, which b asks before counting a key of a
// partition it just gained, is ahead of b's epoch and redirects the
// fetch; b catches up to epoch 2 and sends the check to c.
func TestViewsThatDisagreeCountOnce(t *testing.T) {
	c := limitertest.NewEpochCluster(t, noReplicas)
	for _, n := range []string{"a", "b", "c"} {
		c.Add(n)
	}
	c.SetRing("b", "a", "b")
	c.SetRing("a", "a", "b", "c")
	c.SetRing("c", "a", "b", "c")
	for _, n := range []string{"a", "c", "b"} {
		if _, err := c.HandOff(n); err != nil {
			t.Fatalf("%s: HandOff: %v", n, err)
		}
	}
	// Keys c owns on the full ring and b owns on its own.
	var keys []string
	for _, k := range c.KeysOwnedBy("a", "c", "v", limiter.Request{Limit: hourly}, 60) {
		if c.Owner("b", limiter.Request{Key: k, Limit: hourly}) == "b" {
			keys = append(keys, k)
		}
	}
	if len(keys) < 5 {
		t.Fatalf("only %d keys owned by c on the full ring and b on b's", len(keys))
	}
	keys = keys[:5]
	admitted := map[string]int{}
	for round := 0; round < 40; round++ {
		for _, on := range []string{"a", "b", "c"} {
			for _, k := range keys {
				if r := c.Check(on, limiter.Request{Key: k, Limit: hourly, Cost: 1})[0]; r.Allowed {
					admitted[k]++
				}
			}
		}
	}
	for _, k := range keys {
		if admitted[k] != 100 {
			t.Errorf("%s admitted %d of 120 checks while b's ring lacked c, want its limit 100", k, admitted[k])
		}
	}
	if r := c.Check("b", limiter.Request{Key: keys[0], Limit: hourly})[0]; r.Owner != "c" || r.Source != limiter.SourceOwner {
		t.Errorf("read through b: %+v, want answered by c, the owner on the epoch b caught up to", r)
	}
	// Once b sees c, everyone agrees: nothing left.
	c.SetMembers("a", "b", "c")
	for _, on := range []string{"a", "b", "c"} {
		if bad := remainingOrFallback(t, c, on, keys, hourly, 0, false); len(bad) > 0 {
			t.Errorf("through %s once b saw c, want 0 remaining: %v", on, bad)
		}
	}
}

// A node joins and a key's owner has not seen it yet: it refuses the
// newcomer's fetch. A check forwarded to the newcomer goes back to its
// sender (ErrStateElsewhere), which asks the key's heir on its ring: the
// old owner, which decides it on its count. 60 used of 100 admits 40
// more, not a local share on top.
func TestJoinerSendsChecksBackToTheOwner(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "a", "b", "c")
	var key string
	c.Add("d")
	c.SetRing("a", "a", "b", "c", "d")
	c.SetRing("d", "a", "b", "c", "d")
	for _, k := range c.KeysOwnedBy("a", "d", "j", limiter.Request{Limit: hourly}, 40) {
		if c.Owner("b", limiter.Request{Key: k, Limit: hourly}) == "b" {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatal("no key of d's that b owns on its ring")
	}
	spend(t, c, "b", []string{key}, hourly, 60)
	if got := admitted(c, "a", key, 50); got != 40 {
		t.Errorf("admitted %d of 50 through a while b had not seen d join, want the 40 left", got)
	}
	if r := c.Check("a", limiter.Request{Key: key, Limit: hourly})[0]; r.Remaining != 0 {
		t.Errorf("read through a: %+v, want 0 remaining", r)
	}
}

// A node behind asks a node ahead for a key that has moved on: k is a's
// on epoch 1 ({a}), b's on epoch 2 ({a, b}) and c's on epoch 3 ({a, b,
// c}); b is on epoch 2 while a and c are on 3, and a has handed k's count
// to c. b, asked to check k, fetches it from a, its previous owner: a
// redirects the fetch (it is ahead, and its ring gives k to c), b catches
// up to epoch 3 and sends the check to c, rather than count k afresh
// beside c (60 used of 100: 39 left, not 99).
func TestFetchFromANodeAheadIsRedirected(t *testing.T) {
	calc := limitertest.NewCluster(t, nil, "a", "b", "c")
	calc.SetRing("b", "a", "b")
	var key string
	for _, k := range calc.KeysOwnedBy("a", "c", "r", limiter.Request{Limit: hourly}, 40) {
		if calc.Owner("b", limiter.Request{Key: k, Limit: hourly}) == "b" {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatal("no key of c's on {a, b, c} that is b's on {a, b}")
	}
	c := limitertest.NewEpochCluster(t, noReplicas, "a") // epoch 1
	spend(t, c, "a", []string{key}, hourly, 60)
	c.Add("b")
	c.Add("c")
	c.SetRing("b", "a", "b")      // epoch 2
	c.SetRing("a", "a", "b", "c") // epoch 3
	c.SetRing("c", "a", "b", "c")
	if _, err := c.HandOff("a"); err != nil {
		t.Fatalf("a: HandOff: %v", err)
	}
	r := c.Check("b", limiter.Request{Key: key, Limit: hourly, Cost: 1})[0]
	if r.Source != limiter.SourceOwner || r.Owner != "c" || !r.Allowed || r.Remaining != 39 {
		t.Errorf("check through b: %+v, want allowed by owner c with 39 remaining", r)
	}
	if got := admitted(c, "b", key, 50); got != 39 {
		t.Errorf("admitted %d more through b, want 39", got)
	}
}
