package limiter_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// A 2|3 split of five nodes that cuts a key's owner and its first heir off
// from the others (docs/failure.md, "A split"). With the default replicas
// (a majority of the copies: 2 heirs on 5 nodes) the key's second heir, on
// the majority side, holds a copy: the majority's checks go to it while
// the owner and first heir are unreachable, and once the majority removes
// them as dead it is the key's new owner, on that copy. The minority,
// whose leases have run out, answers from its local shares, limit/5 each
// on its ring of 5. A key spent to 60 of 100 before the split admits at
// most 100 + 2*20 in all: 40 on the majority's side, 20 on each node of
// the minority. With one heir the majority had no copy: a local share on
// each of its nodes, then the key afresh.
func TestSplitMajorityDecidesOnALaterHeirsCopy(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	ls := newLeases(names...)
	c := limitertest.NewCluster(t, ls.configure, names...)
	ls.clock = c.Clock.Now
	req := limiter.Request{Limit: hourly}
	key := c.KeysOwnedBy("a", "a", "k", req, 1)[0]
	heirs, err := c.Node("a").Ring().Heirs(2)
	if err != nil {
		t.Fatal(err)
	}
	hash := identity.Inline(uint8(hourly.Algorithm), hourly.Period, key)
	h1, ok1 := heirs.Heir(hash, 0)
	h2, ok2 := heirs.Heir(hash, 1)
	if !ok1 || !ok2 {
		t.Fatalf("key %s has heirs %v %v on 5 nodes, want 2", key, h1, h2)
	}
	for _, x := range []string{"a", h1.Name} { // leases the split lets run out
		ls.set(x, limitertest.Epoch.Add(time.Second))
	}
	spend(t, c, "a", []string{key}, hourly, 60)
	c.Node("a").Replicate(context.Background())

	minority := []string{"a", h1.Name}
	var majority []string
	for _, n := range names {
		if !slices.Contains(minority, n) {
			majority = append(majority, n)
		}
	}
	for _, x := range minority {
		for _, y := range majority {
			c.Net.Cut(x, y)
		}
	}
	c.Clock.Advance(2 * time.Second) // the minority's leases ran out

	// Before the majority removes them: the minority on local shares, the
	// majority on the second heir's copy.
	perNode := map[string]int{}
	for round := 0; round < 2; round++ {
		for _, on := range names {
			perNode[on] += admitted(c, on, key, 30)
		}
	}
	for _, on := range minority {
		if perNode[on] != 20 {
			t.Errorf("minority node %s admitted %d, want its local share of 20 (100/5: its ring stays at 5)", on, perNode[on])
		}
	}
	onMajority := 0
	for _, on := range majority {
		onMajority += perNode[on]
	}
	if onMajority != 40 {
		t.Errorf("the majority admitted %d while the owner and first heir were cut off, want the 40 left of the second heir's copy (%v)", onMajority, perNode)
	}

	// The majority removes the owner and the first heir as dead: the
	// second heir owns the key, on its copy and what it admitted acting.
	var ends []func()
	for _, n := range majority {
		for _, dead := range minority {
			ends = append(ends, c.Node(n).AwaitDead(dead))
		}
	}
	c.SetMembers(majority...)
	if got := c.Owner(majority[0], limiter.Request{Key: key, Limit: hourly}); got != h2.Name {
		t.Fatalf("on the majority's ring %v the key's owner is %s, want its second heir %s", c.Node(majority[0]).Ring().Members(), got, h2.Name)
	}
	after := 0
	for _, on := range majority {
		after += admitted(c, on, key, 30)
	}
	for _, end := range ends {
		end()
	}
	for _, on := range majority {
		after += admitted(c, on, key, 30)
	}
	if after != 0 {
		t.Errorf("the majority admitted %d more once it removed the owner and first heir, want 0 (the key spent on the copy)", after)
	}
	total := 60 + onMajority + after + perNode["a"] + perNode[h1.Name]
	if bound := 100 + 2*(100/5); total > bound {
		t.Errorf("the key admitted %d in all, bound L + 2*floor(L/5) = %d", total, bound)
	}
}

// A later heir that holds nothing of a key (the owner's round of
// replication has not reached it: a joiner, a new ring) does not count it
// afresh when its owner and first heir are unreachable: its local share
// answers, one share for every caller that reaches it.
func TestLaterHeirWithoutACopyAnswersFromItsShare(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	c := limitertest.NewCluster(t, nil, names...)
	key := c.KeysOwnedBy("a", "a", "k", limiter.Request{Limit: hourly}, 1)[0]
	heirs, err := c.Node("a").Ring().Heirs(limiter.AutoReplicas(len(names)))
	if err != nil {
		t.Fatal(err)
	}
	h1, _ := heirs.Heir(identity.Inline(uint8(hourly.Algorithm), hourly.Period, key), 0)
	spend(t, c, "a", []string{key}, hourly, 60) // no round of replication
	got := 0
	for _, on := range names {
		if on == "a" || on == h1.Name {
			continue
		}
		c.Net.Cut(on, "a")
		c.Net.Cut(on, h1.Name)
	}
	for _, on := range names {
		if on != "a" && on != h1.Name {
			got += admitted(c, on, key, 30)
		}
	}
	if got != 100/5 {
		t.Errorf("the nodes cut off from the owner and first heir admitted %d, want the second heir's local share, 20", got)
	}
}
