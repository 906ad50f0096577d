package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/policy"
)

// grantCluster builds n0 and n1 with a policy "hot" (100 an hour, grants
// always, grants of 25: capacity/(2 × nodes)) and a started n2 that has
// not joined, and returns a key that n0 owns now and n2 owns once it
// joins. configure, if given, changes every node's config further.
func grantCluster(t *testing.T, configure ...func(*limiter.Config)) (*limitertest.Cluster, limiter.Request) {
	t.Helper()
	set, err := policy.NewSet(false, policy.Policy{Name: "hot", Limit: hourly, Grants: policy.GrantAlways})
	if err != nil {
		t.Fatal(err)
	}
	c := limitertest.NewCluster(t, func(cfg *limiter.Config) {
		cfg.Policies = set
		cfg.Grants.Refill = time.Hour // every grant is the most a node may hold
		for _, f := range configure {
			f(cfg)
		}
	}, "n0", "n1")
	c.Add("n2")
	c.SetRing("n2", "n0", "n1", "n2")
	for _, k := range c.KeysOwnedBy("n2", "n2", "hot", limiter.Request{Policy: "hot"}, 50) {
		req := limiter.Request{Key: k, Policy: "hot"}
		if c.Owner("n0", req) == "n0" {
			c.SetRing("n2", "n2")
			return c, req
		}
	}
	t.Fatal("no key moves from n0 to n2")
	return nil, limiter.Request{}
}

// use60 spends 60 of the key's 100: 50 on the owner n0, 10 on n1 from a
// grant of 25, so n0 has 25 left and n1 holds 15 unspent.
func use60(t *testing.T, c *limitertest.Cluster, req limiter.Request) {
	t.Helper()
	for _, st := range []struct {
		on     string
		cost   int64
		source limiter.Source
	}{{"n0", 50, limiter.SourceOwner}, {"n1", 10, limiter.SourceGrant}} {
		r := req
		r.Cost = st.cost
		if res := c.Check(st.on, r)[0]; !res.Allowed || res.Source != st.source {
			t.Fatalf("spend %d on %s: %+v, want allowed from %s", st.cost, st.on, res, st.source)
		}
	}
	if got := remaining(t, c, "n0", req); got != 25 {
		t.Fatalf("owner n0 after the grant: %d remaining, want 25", got)
	}
}

// remaining reads the key's remaining through node on.
func remaining(t *testing.T, c *limitertest.Cluster, on string, req limiter.Request) int64 {
	t.Helper()
	req.Cost = 0
	res := c.Check(on, req)[0]
	if res.Err != nil || res.Source != limiter.SourceOwner {
		t.Fatalf("read on %s: %+v", on, res)
	}
	return res.Remaining
}

// A grant's unspent tokens go back to the bucket when the grant ends
// early, so the count is exact: 60 used of 100 leaves 40, not 25.
func TestGrantReturns(t *testing.T) {
	cases := []struct {
		name string
		do   func(t *testing.T, c *limitertest.Cluster)
		read string // the key's owner afterwards
	}{
		{"n2 joins, owner hands off first", func(t *testing.T, c *limitertest.Cluster) {
			c.SetMembers("n0", "n1", "n2")
		}, "n2"},
		{"n2 joins, holder returns first", func(t *testing.T, c *limitertest.Cluster) {
			for _, n := range []string{"n0", "n1", "n2"} {
				c.SetRing(n, "n0", "n1", "n2")
			}
			for _, n := range []string{"n1", "n2", "n0"} {
				if _, err := c.HandOff(n); err != nil {
					t.Fatalf("%s: HandOff: %v", n, err)
				}
			}
		}, "n2"},
		{"holder leaves", func(t *testing.T, c *limitertest.Cluster) {
			if err := c.Leave("n1", "n0"); err != nil {
				t.Fatal(err)
			}
		}, "n0"},
		{"holder stops needing it (idle half the TTL at a sweep)", func(t *testing.T, c *limitertest.Cluster) {
			c.Clock.Advance(600 * time.Millisecond)
			c.Node("n1").Sweep()
		}, "n0"},
		{"owner leaves: the holder returns to it, it credits the new owner", func(t *testing.T, c *limitertest.Cluster) {
			if err := c.Leave("n0", "n1"); err != nil {
				t.Fatal(err)
			}
			c.SetRing("n1", "n1")
			if _, err := c.HandOff("n1"); err != nil {
				t.Fatal(err)
			}
		}, "n1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, req := grantCluster(t)
			use60(t, c, req)
			tc.do(t, c)
			if got := remaining(t, c, tc.read, req); got != 40 {
				t.Fatalf("owner %s: %d remaining, want 40 (60 used of 100)", tc.read, got)
			}
			if s := c.Node("n1").GrantStats(); s.Returned != 15 || s.ReturnFailures != 0 {
				t.Fatalf("n1 grant stats %+v, want 15 returned, no failures", s)
			}
		})
	}
}

// A return outlasts a credit that is slow to reach the key's new owner:
// here the issuer's link to it takes longer than the return's deadline
// (four fetch timeouts; in a cluster, a new owner refuses the issuer for
// as long as it has not seen it join). The issuer answers the holder in
// time and credits the owner in the background: the count stays exact.
func TestGrantReturnWaitsForASlowCredit(t *testing.T) {
	const fetch = 20 * time.Millisecond
	c, req := grantCluster(t, func(cfg *limiter.Config) { cfg.FetchTimeout = fetch })
	use60(t, c, req)
	returnOnMove(t, c, req, func() {
		c.Net.Delay("n0", "n2", 10*fetch) // the issuer's credit to the new owner
	})
}

// A return whose call fails is sent again while its deadline lasts: the
// issuer redeems a grant once, so a second call cannot credit twice.
func TestGrantReturnRetriedAfterAFailedCall(t *testing.T) {
	c, req := grantCluster(t)
	use60(t, c, req)
	before := c.Net.Calls("n1", "n0").Check
	returnOnMove(t, c, req, func() {
		c.Net.FailChecks("n1", "n0", 2) // the holder's return to the issuer
	})
	if got := c.Net.Calls("n1", "n0").Check - before; got != 1 {
		t.Fatalf("%d returns reached the issuer, want 1 (the third try)", got)
	}
}

// returnOnMove moves use60's key from n0 to n2 on every ring, applies
// fault, and has the holder n1 hand off: its 15 unspent tokens must be
// returned without a failure, and once the issuer's credit is done and the
// network healed, the key's new owner n2 must have 40 left.
func returnOnMove(t *testing.T, c *limitertest.Cluster, req limiter.Request, fault func()) {
	t.Helper()
	for _, n := range []string{"n0", "n1", "n2"} {
		c.SetRing(n, "n0", "n1", "n2")
	}
	fault()
	if _, err := c.HandOff("n1"); err != nil {
		t.Fatalf("holder n1: HandOff: %v", err)
	}
	if s := c.Node("n1").GrantStats(); s.Returned != 15 || s.ReturnFailures != 0 {
		t.Fatalf("n1 grant stats %+v, want 15 returned, no failures", s)
	}
	c.Node("n0").WaitCredits(context.Background()) // the issuer's credit, in the background
	c.Net.Heal()
	for _, n := range []string{"n2", "n0"} {
		if _, err := c.HandOff(n); err != nil {
			t.Fatalf("%s: HandOff: %v", n, err)
		}
	}
	if got := remaining(t, c, "n2", req); got != 40 {
		t.Fatalf("owner n2: %d remaining, want 40 (60 used of 100)", got)
	}
}

// An issuer that has left the holder's ring gets one call: its loss is
// what moved the key, and the holder's handoff waits for the returns.
func TestGrantReturnToAnIssuerOffTheRingIsNotRetried(t *testing.T) {
	c, req := grantCluster(t)
	use60(t, c, req)
	before := c.Net.Calls("n1", "n0").Check
	c.Net.FailChecks("n1", "n0", 1)
	c.SetRing("n1", "n1", "n2")
	c.SetRing("n2", "n1", "n2")
	if _, err := c.HandOff("n1"); err != nil {
		t.Fatalf("holder n1: HandOff: %v", err)
	}
	if s := c.Node("n1").GrantStats(); s.Returned != 0 || s.ReturnFailures != 1 {
		t.Fatalf("n1 grant stats %+v, want the one return failed", s)
	}
	if got := c.Net.Calls("n1", "n0").Check - before; got != 0 {
		t.Fatalf("%d returns reached the issuer off the ring after its call failed, want 0", got)
	}
}

// Without a return the unspent tokens lapse: a grant past its TTL gives
// nothing back.
func TestGrantReturnAfterTTL(t *testing.T) {
	c, req := grantCluster(t)
	use60(t, c, req)
	c.Clock.Advance(2 * time.Second)
	c.Node("n1").ReturnGrants(context.Background())
	if got := remaining(t, c, "n0", req); got != 25 {
		t.Fatalf("owner: %d remaining, want 25 (the grant lapsed)", got)
	}
}

// A client's grant (Limiter.Grant) is returned once, at most what was
// granted, only for its key, and only before its TTL; other ids are
// forgeries and credit nothing.
func TestReturnGrantGuards(t *testing.T) {
	c, req := grantCluster(t)
	other := limiter.Request{Key: req.Key + "-other", Policy: "hot"}
	ctx := context.Background()
	g, _, err := c.Node("n1").Grant(ctx, req, 30)
	if err != nil || g.Tokens != 30 || g.ID == 0 || g.Issuer != "n0" {
		t.Fatalf("Grant: %+v %v, want 30 tokens recorded by n0", g, err)
	}
	g2, _, err := c.Node("n1").Grant(ctx, req, 10)
	if err != nil || g2.Tokens != 10 {
		t.Fatalf("second Grant: %+v %v", g2, err)
	}
	steps := []struct {
		name      string
		on        string
		req       limiter.Request
		g         limiter.Granted
		advance   time.Duration
		credited  int64
		remaining int64
	}{
		{"another key's return of the grant", "n1", other, limiter.Granted{Tokens: 5, ID: g.ID, Issuer: "n0"}, 0, 0, 60},
		{"a forged id", "n1", req, limiter.Granted{Tokens: 5, ID: g.ID + 1, Issuer: "n0"}, 0, 0, 60},
		{"more than granted is capped, on the issuer itself", "n0", req, limiter.Granted{Tokens: 40, ID: g.ID, Issuer: "n0"}, 0, 30, 90},
		{"a double return", "n1", req, limiter.Granted{Tokens: 5, ID: g.ID, Issuer: "n0"}, 0, 0, 90},
		{"after the TTL", "n1", req, limiter.Granted{Tokens: 10, ID: g2.ID, Issuer: "n0"}, 2 * time.Second, 0, 90},
	}
	for _, st := range steps {
		c.Clock.Advance(st.advance)
		got, err := c.Node(st.on).ReturnGrant(ctx, st.req, st.g)
		if err != nil || got != st.credited {
			t.Fatalf("%s: credited %d (%v), want %d", st.name, got, err, st.credited)
		}
		if r := remaining(t, c, "n0", req); r != st.remaining {
			t.Fatalf("%s: %d remaining, want %d", st.name, r, st.remaining)
		}
	}
	for _, bad := range []struct {
		g     limiter.Granted
		field string
	}{
		{limiter.Granted{Tokens: 0, ID: 1, Issuer: "n0"}, "want"},
		{limiter.Granted{Tokens: 101, ID: 1, Issuer: "n0"}, "want"},
		{limiter.Granted{Tokens: 1, Issuer: "n0"}, "return_grant"},
		{limiter.Granted{Tokens: 1, ID: 1}, "issuer"},
	} {
		_, err := c.Node("n1").ReturnGrant(ctx, req, bad.g)
		var fe *limiter.FieldError
		if !errors.As(err, &fe) || fe.Field != bad.field {
			t.Fatalf("ReturnGrant(%+v): %v, want a field error on %s", bad.g, err, bad.field)
		}
	}
}
