package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/store"
)

// A grant's credit outlives the heir's copy of the key: the owner n0 has
// copied the key (50 spent, a grant out of which 10 are spent) to its heir h
// and leaves, handing the key to h, whose ring still has n0 (it has not
// seen the leave). The holder g returns its unspent tokens to n0, which
// credits h. When h then sees the leave, it takes over the copies of n0's
// keys: the copy, older than the credit, must not undo it, nor must a
// replica that n0 sent before it let go and that arrives late.
func TestGrantCreditOutlivesTheHeirsCopy(t *testing.T) {
	set, err := policy.NewSet(false, policy.Policy{Name: "hot", Limit: hourly, Grants: policy.GrantAlways})
	if err != nil {
		t.Fatal(err)
	}
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) {
		cfg.Policies = set
		cfg.Grants.Refill = time.Hour
	}, "n0", "n1", "n2")
	calc := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.Policies = set }, "n0", "n1", "n2")
	calc.SetRing("n1", "n1", "n2")
	req := limiter.Request{Key: c.KeysOwnedBy("n0", "n0", "hot", limiter.Request{Policy: "hot"}, 1)[0], Policy: "hot"}
	h := calc.Owner("n1", req) // the key's owner once n0 has gone
	g := map[string]string{"n1": "n2", "n2": "n1"}[h]
	for _, st := range []struct {
		on     string
		cost   int64
		source limiter.Source
	}{{"n0", 50, limiter.SourceOwner}, {g, 10, limiter.SourceGrant}} {
		r := req
		r.Cost = st.cost
		if res := c.Check(st.on, r)[0]; !res.Allowed || res.Source != st.source {
			t.Fatalf("spend %d on %s: %+v, want allowed from %s", st.cost, st.on, res, st.source)
		}
	}
	if n := c.Node("n0").Replicate(context.Background()); n == 0 {
		t.Fatal("n0 copied nothing to its heirs")
	}
	if err := c.Leave("n0", "n1", "n2"); err != nil {
		t.Fatalf("n0: Leave: %v", err)
	}
	c.SetRing(g, "n1", "n2")
	if _, err := c.HandOff(g); err != nil { // returns the grant whose key moved
		t.Fatalf("%s: HandOff: %v", g, err)
	}
	c.Node("n0").WaitCredits(context.Background())
	if s := c.Node(g).GrantStats(); s.Returned != s.Granted-10 || s.ReturnFailures != 0 {
		t.Fatalf("%s grant stats %+v, want the unspent tokens returned, no failures", g, s)
	}
	if got := remaining(t, c, h, req); got != 40 {
		t.Fatalf("%s after the credit: %d remaining, want 40", h, got)
	}
	// A replica n0 sent before it let go, arriving late (90 of 100 used).
	stale := store.Entry{Key: identity.Policy(uint8(bucket.TokenBucket), "hot", req.Key), Algorithm: bucket.TokenBucket,
		Token: bucket.TokenState{TAT: c.Clock.Now().UnixNano() + 90*int64(time.Hour/100)}}
	if refused, err := c.Node(h).AcceptReplicas(context.Background(), "n0", []store.Entry{stale}); err != nil || refused != 0 {
		t.Fatalf("%s: AcceptReplicas: %d refused, %v", h, refused, err)
	}
	c.Remove("n0")
	c.SetRing(h, "n1", "n2")
	if _, err := c.HandOff(h); err != nil {
		t.Fatalf("%s: HandOff: %v", h, err)
	}
	if got := remaining(t, c, h, req); got != 40 {
		t.Fatalf("owner %s once it saw n0 leave: %d remaining, want 40 (60 used of 100)", h, got)
	}
}
