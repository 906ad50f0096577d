package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/store"
)

// A kill -9 of an owner loses nothing replicated: its heir takes the key
// over at the count it was sent; what the owner admitted after the last
// round is all that is lost. With replication off the key starts afresh,
// which is what this test would see without it.
func TestReplicaSurvivesOwnerKill(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		want     int64 // remaining after the kill: 100 - 60 replicated
	}{
		{"replicated", 1, 40},
		{"off", -1, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := limitertest.NewCluster(t, func(cfg *limiter.Config) { cfg.Replicas = tc.replicas }, "a", "b", "c")
			keys := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 5)
			spend(t, c, "a", keys, hourly, 60)
			sent := c.Node("a").Replicate(context.Background())
			spend(t, c, "a", keys, hourly, 5) // after the last round: lost with a
			if tc.replicas > 0 && sent != len(keys) {
				t.Fatalf("a replicated %d states, want %d", sent, len(keys))
			}
			c.Remove("a") // kill -9: a's store is gone
			c.SetMembers("b", "c")
			for _, on := range []string{"b", "c"} {
				if bad := remainingOrFallback(t, c, on, keys, hourly, tc.want, false); len(bad) > 0 {
					t.Errorf("through %s after the kill, want %d remaining: %v", on, tc.want, bad)
				}
			}
		})
	}
}

// Replicate sends only what changed since the last round, and after a
// ring change what the change gave new heirs.
func TestReplicateSendsChanges(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "a", "b")
	ctx := context.Background()
	keys := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 4)
	spend(t, c, "a", keys, hourly, 1)
	steps := []struct {
		do   func()
		want int
	}{
		{func() {}, 4}, // first round: every state
		{func() {}, 0}, // nothing changed
		{func() { spend(t, c, "a", keys[:1], hourly, 1); spend(t, c, "a", keys[:1], hourly, 1) }, 1}, // one key changed, twice
		{func() { c.Add("c"); c.SetMembers("a", "b", "c") }, -1},                                     // new heirs: whatever they changed for
	}
	for i, st := range steps {
		st.do()
		got := c.Node("a").Replicate(ctx)
		if st.want >= 0 && got != st.want {
			t.Errorf("step %d: sent %d states, want %d", i, got, st.want)
		}
	}
	if got := c.Node("a").Replicate(ctx); got != 0 {
		t.Errorf("after the ring change settled: sent %d, want 0", got)
	}
	if s := c.Node("b").ReplicaStats(); s.Received < 4 {
		t.Errorf("b received %d copies, want at least 4", s.Received)
	}
}

// A new owner that is not the heir (a node joined as the owner died)
// fetches the copy from the heir, which hands it over.
func TestReplicaFetchedByNewOwner(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "a", "b", "c")
	keys := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 40)
	spend(t, c, "a", keys, hourly, 60)
	c.Node("a").Replicate(context.Background())
	c.Remove("a")
	c.Add("d")
	c.SetMembers("b", "c", "d")
	byD := 0
	for _, k := range keys {
		if c.Owner("b", limiter.Request{Key: k, Limit: hourly}) == "d" {
			byD++
		}
	}
	if bad := remainingOrFallback(t, c, "b", keys, hourly, 40, false); len(bad) > 0 {
		t.Errorf("after the kill and a join, want 40 remaining: %v", bad)
	}
	if byD == 0 {
		t.Fatalf("none of %d keys moved to the newcomer d: the test shows nothing", len(keys))
	}
}

// An heir a round could not reach gets every state it is heir of again,
// once reachable, even those that have not changed since: a kill -9 of the
// owner after that loses nothing.
func TestReplicateResendsToHeirLeftBehind(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "a", "b")
	ctx := context.Background()
	keys := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 4)
	spend(t, c, "a", keys, hourly, 60)
	c.Net.Cut("a", "b")
	if sent := c.Node("a").Replicate(ctx); sent != 0 {
		t.Fatalf("sent %d states over a cut link", sent)
	}
	c.Net.Heal()
	c.Node("a").Replicate(ctx) // within the resync interval: nothing new
	c.Clock.Advance(limiter.ResyncInterval)
	if sent := c.Node("a").Replicate(ctx); sent != len(keys) {
		t.Fatalf("after the resync interval: sent %d states, want %d", sent, len(keys))
	}
	c.Remove("a")
	c.SetMembers("b")
	if bad := remainingOrFallback(t, c, "b", keys, hourly, 40, false); len(bad) > 0 {
		t.Errorf("after the owner's kill, want 40 remaining: %v", bad)
	}
}

// Urgent signals when a key its node decides spends its last token, and
// not before: the node then replicates at once.
func TestUrgentWhenAKeySpendsItsLastToken(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1")
	req := limiter.Request{Key: "acct:1", Limit: tb(10, time.Hour), Cost: 9}
	owner := c.Node(c.Owner("n0", req))
	urgent := owner.Urgent()
	if urgent == nil {
		t.Fatal("Urgent is nil with replication on")
	}
	pending := func() bool {
		select {
		case <-urgent:
			return true
		default:
			return false
		}
	}
	steps := []struct {
		cost int64
		want bool
	}{
		{9, false}, // 1 left
		{1, true},  // the last token
		{1, false}, // denied: nothing changed
	}
	for i, s := range steps {
		req.Cost = s.cost
		c.Check(c.Owner("n0", req), req)
		if got := pending(); got != s.want {
			t.Fatalf("step %d (cost %d): urgent %v, want %v", i, s.cost, got, s.want)
		}
	}
	off := limitertest.NewCluster(t, noReplicas, "n0", "n1")
	if off.Node("n0").Urgent() != nil {
		t.Fatal("Urgent is not nil with replication off")
	}
}

// An heir that has just joined and refuses a round because it has not
// heard of the owner yet is sent every state again a tenth of the resync
// interval later, not a whole interval: an owner killed in between would
// otherwise leave its heir without the copies (the fault test's kill right
// after a join: the heir acted from nothing, 2x the limit).
func TestReplicateResendsSoonToHeirThatDidNotKnowTheOwner(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "a", "b")
	ctx := context.Background()
	keys := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 4)
	spend(t, c, "a", keys, hourly, 60)
	c.Add("b") // b restarted: a joiner that knows only itself
	if sent := c.Node("a").Replicate(ctx); sent != 0 {
		t.Fatalf("sent %d states to an heir that refuses the owner", sent)
	}
	c.SetRing("b", "a", "b")
	c.Clock.Advance(limiter.ResyncInterval / 10)
	if sent := c.Node("a").Replicate(ctx); sent != len(keys) {
		t.Fatalf("a tenth of the resync interval after the refusal: sent %d states, want %d", sent, len(keys))
	}
}

// OnChanged receives the states changed since the last round, with
// replication on or off, each once.
func TestReplicateTapsChangesForOnChanged(t *testing.T) {
	for _, replicas := range []int{1, -1} {
		var got []store.Entry
		c := limitertest.NewCluster(t, func(cfg *limiter.Config) {
			cfg.Replicas = replicas
			cfg.OnChanged = func(es []store.Entry) { got = append(got, es...) }
		}, "a", "b")
		keys := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 3)
		spend(t, c, "a", keys, hourly, 2)
		c.Node("a").Replicate(context.Background())
		if len(got) != len(keys) {
			t.Fatalf("replicas %d: OnChanged got %d states after a round, want %d", replicas, len(got), len(keys))
		}
		c.Node("a").Replicate(context.Background())
		if len(got) != len(keys) {
			t.Fatalf("replicas %d: OnChanged got %d states after a round with no change, want %d", replicas, len(got), len(keys))
		}
	}
}
