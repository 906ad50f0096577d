package limiter_test

import (
	"testing"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
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
