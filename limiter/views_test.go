package limiter_test

import (
	"testing"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// Three nodes start together and b has not heard of c yet: its ring is
// {a, b} while a's and c's are {a, b, c}. Keys that c owns on the full
// ring are b's on b's ring. Checks of them through every node must not
// be counted by both b (afresh, on its view) and c: a, which b asks
// before counting a key of a partition it just gained, names c as the
// owner, so b sends the check there.
func TestViewsThatDisagreeCountOnce(t *testing.T) {
	c := limitertest.NewCluster(t, noReplicas)
	for _, n := range []string{"a", "b", "c"} {
		c.Add(n)
	}
	c.SetRing("a", "a", "b", "c")
	c.SetRing("c", "a", "b", "c")
	c.SetRing("b", "a", "b")
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
		t.Errorf("read through b: %+v, want answered by c, the owner a named", r)
	}
	// Once b sees c, everyone agrees: nothing left.
	c.SetMembers("a", "b", "c")
	for _, on := range []string{"a", "b", "c"} {
		if bad := remainingOrFallback(t, c, on, keys, hourly, 0, false); len(bad) > 0 {
			t.Errorf("through %s once b saw c, want 0 remaining: %v", on, bad)
		}
	}
}
