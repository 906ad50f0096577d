//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
)

var base = []string{"n0", "n1", "n2"}

func keysN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func TestE2E(t *testing.T) {
	requireDocker(t)
	start := time.Now()
	c := newCluster(t, 3)
	t.Logf("cluster of 3 up in %v (prefix %s, cluster subnet %s0/24)", time.Since(start).Round(time.Millisecond), c.prefix, c.subnet)

	t.Run("ExactAdmission", func(t *testing.T) { exactAdmission(t, c) })
	t.Run("KillOwner", func(t *testing.T) { killOwner(t, c) })
	t.Run("RLSExact", func(t *testing.T) { rlsExact(t, c) })
	t.Run("RLSKillOwner", func(t *testing.T) { rlsKillOwner(t, c) })
	t.Run("Partition", func(t *testing.T) { partition(t, c) })
	t.Run("RollingRestart", func(t *testing.T) { rollingRestart(t, c) })
	t.Run("Scale", func(t *testing.T) { scale(t, c) })
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// 1. 300 checks of one key (100/1h) spread over the 3 nodes admit exactly 100.
func exactAdmission(t *testing.T, c *cluster) {
	c.ensureHealthy(t, base...)
	lim := client.Limit{Limit: 100, Period: time.Hour}
	var vias []via
	for _, s := range base {
		vias = append(vias, via{s, c.nodes[s].cli})
	}
	// 6 workers, 2 per node, 50 checks each: 300 checks.
	l := &load{stop: make(chan struct{})}
	for w := 0; w < 6; w++ {
		v := vias[w%3]
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; i < 50; i++ {
				st := time.Now()
				res, err := v.cli.Check(context.Background(), client.Item{Key: "exact", Limit: lim})
				r := rec{at: st, via: v.name, key: "exact", err: err, lat: time.Since(st)}
				if err == nil {
					r.allowed, r.source, r.owner, r.err = res[0].Allowed, res[0].Source, res[0].Owner, res[0].Err
				}
				l.mu.Lock()
				l.recs = append(l.recs, r)
				l.mu.Unlock()
			}
		}()
	}
	s := summarize(l.Stop())
	t.Logf("exact admission: %s; admitted %d vs bound 100", s, s.admitted)
	requireNoErrors(t, s)
	if s.checks != 300 || s.admitted != 100 {
		t.Errorf("admitted %d of %d checks, want exactly 100 of 300", s.admitted, s.checks)
	}
}

// 2. SIGKILL the owner of busy keys under load through the other nodes.
func killOwner(t *testing.T, c *cluster) {
	c.ensureHealthy(t, base...)
	const L = 60
	lim := client.Limit{Limit: L, Period: time.Hour}
	keys := keysN("kill", 12)
	own := owners(t, c.allClient(base...), keys, lim)
	victimName := own[keys[0]]
	victim := c.byName(victimName)
	busy := map[string]bool{}
	for k, o := range own {
		if o == victimName {
			busy[k] = true
		}
	}
	var vias []via
	for _, s := range base {
		if s != victim.short {
			vias = append(vias, via{s, c.nodes[s].cli})
		}
	}
	t.Logf("victim %s owns %d of %d keys; load through %s and %s", victim.short, len(busy), len(keys), vias[0].name, vias[1].name)
	ld := startLoad(vias, keys, lim, 4, 2*time.Millisecond)
	defer ld.Stop()

	// Let the victim's keys run out first, so that its count (L) is spent.
	if !ld.waitFor(20*time.Second, func(rs []rec) bool {
		adm := map[string]int{}
		for _, r := range rs {
			if r.allowed && busy[r.key] {
				adm[r.key]++
			}
		}
		for k := range busy {
			if adm[k] < L {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the victim's keys were not exhausted within 20s")
	}
	tKill := time.Now()
	mustDocker(t, "kill", victim.name)
	t.Logf("killed %s", victim.short)

	// Wait until every busy key is answered by a live owner.
	var moved time.Duration
	ok := ld.waitFor(20*time.Second, func(rs []rec) bool {
		seen := map[string]bool{}
		for _, r := range rs {
			if r.at.After(tKill) && busy[r.key] && r.err == nil && r.source == "owner" && r.owner != victimName {
				seen[r.key] = true
			}
		}
		return len(seen) == len(busy)
	})
	moved = time.Since(tKill)
	if !ok {
		t.Errorf("busy keys not answered by a new owner within 20s of the kill")
	}
	// Then let the new owners' fresh counts run out too (or 10 s).
	tMoved := time.Now()
	ld.waitFor(10*time.Second, func(rs []rec) bool {
		den := map[string]bool{}
		for _, r := range rs {
			if r.at.After(tMoved) && busy[r.key] && r.err == nil && !r.allowed && r.source == "owner" {
				den[r.key] = true
			}
		}
		return len(den) == len(busy)
	})
	recs := ld.Stop()

	all := summarize(recs)
	var after []rec
	var firstFallback time.Duration = -1
	type phase struct{ before, fallback, grant, afterMove int }
	per := map[string]*phase{}
	for k := range busy {
		per[k] = &phase{}
	}
	for _, r := range recs {
		if r.at.After(tKill) {
			after = append(after, r)
			if busy[r.key] && r.source == "fallback" && firstFallback < 0 {
				firstFallback = r.at.Sub(tKill)
			}
		}
		if !busy[r.key] || !r.allowed || r.err != nil {
			continue
		}
		p := per[r.key]
		switch {
		case r.source == "fallback":
			p.fallback++
		case r.owner == victimName && r.source == "grant":
			p.grant++
		case r.owner == victimName:
			p.before++
		default:
			p.afterMove++
		}
	}
	as := summarize(after)
	t.Logf("kill: whole scenario %s", all)
	t.Logf("kill: after the kill %s; first fallback %v after the kill; all busy keys on a new owner after %v",
		as, firstFallback.Round(time.Millisecond), moved.Round(time.Millisecond))
	// The documented bound (docs/failure.md): L, replicated to each key's
	// heir, which answers for the dead owner and then takes the key over,
	// plus A, what the owner admitted in its last replication interval
	// (50 ms), before the copy left it. The load spends every key evenly,
	// so the keys reach L together, right before the kill: A is counted
	// as the owner's admissions from twice the interval before tKill on
	// (docker kill lands after tKill). The target, 1.1 L, is reported.
	const replicationWindow = 2 * 50 * time.Millisecond
	lastRound := map[string]int{}
	for _, r := range recs {
		if busy[r.key] && r.allowed && r.err == nil && r.owner == victimName && r.source != "fallback" && r.at.After(tKill.Add(-replicationWindow)) {
			lastRound[r.key]++
		}
	}
	target := L + L/10
	maxTotal, overTarget := 0, 0
	bound := 0
	for _, k := range keys {
		p, ok := per[k]
		if !ok {
			continue
		}
		total := p.before + p.grant + p.fallback + p.afterMove
		if total > maxTotal {
			maxTotal = total
		}
		if total > target {
			overTarget++
		}
		kb := L + lastRound[k]
		bound = max(bound, kb)
		t.Logf("kill: key %s admitted %d = %.2fx L (victim owner %d, of them %d in its last %v before the kill, + victim grants %d, fallback %d, new owner %d); documented bound %d, target %d",
			k, total, float64(total)/L, p.before, lastRound[k], replicationWindow, p.grant, p.fallback, p.afterMove, kb, target)
		if total > kb {
			t.Errorf("key %s admitted %d > the documented bound %d", k, total, kb)
		}
	}
	t.Logf("kill: %d busy keys above the 1.1x target (%d)", overTarget, target)
	t.Logf("kill: max admitted per busy key %d (L=%d, documented bound %d)", maxTotal, L, bound)
	requireNoErrors(t, as)
	requireNoErrors(t, all)
	if as.sources["fallback"] == 0 {
		t.Errorf("no fallback answers after the kill")
	}

	tStart := time.Now()
	mustDocker(t, "start", victim.name)
	if err := c.waitMembers(3, c.names(base...), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill: %s restarted, ring of 3 again after %v", victim.short, time.Since(tStart).Round(time.Millisecond))
}

// 3. Cut one node off the cluster network for 20 s under load, then heal.
func partition(t *testing.T, c *cluster) {
	c.ensureHealthy(t, base...)
	lim := client.Limit{Limit: 1_000_000, Period: time.Hour}
	keys := keysN("part", 12)
	iso := c.nodes["n2"]
	own := owners(t, c.allClient(base...), keys, lim)
	var vias []via
	for _, s := range base {
		vias = append(vias, via{s, c.nodes[s].cli})
	}
	ld := startLoad(vias, keys, lim, 6, 5*time.Millisecond)
	defer ld.Stop()
	ld.waitFor(10*time.Second, func(rs []rec) bool { return len(rs) >= 300 })

	tCut := time.Now()
	mustDocker(t, "network", "disconnect", c.clusterNet, iso.name)
	cut := true
	defer func() {
		if cut {
			docker("network", "connect", "--ip", iso.ip, c.clusterNet, iso.name)
		}
	}()
	// The published ports must keep working while the node is cut off.
	if _, err := c.members(iso); err != nil {
		t.Fatalf("isolated node unreachable through its published port: %v", err)
	}
	// Hold the partition for 20 s, watching each side's view of the ring.
	var isoAlone, majorityDropped time.Duration = -1, -1
	for time.Since(tCut) < 20*time.Second {
		if m, err := c.members(iso); err == nil && len(m) == 1 && isoAlone < 0 {
			isoAlone = time.Since(tCut)
		}
		if m, err := c.members(c.nodes["n0"]); err == nil && len(m) == 2 && majorityDropped < 0 {
			majorityDropped = time.Since(tCut)
		}
		time.Sleep(250 * time.Millisecond)
	}
	isoView, _ := c.members(iso)
	majView, _ := c.members(c.nodes["n0"])
	tHeal := time.Now()
	mustDocker(t, "network", "connect", "--ip", iso.ip, c.clusterNet, iso.name)
	cut = false
	err := c.waitMembers(3, c.names(base...), 90*time.Second)
	healed := time.Since(tHeal)
	var pathHealed time.Duration
	if err == nil {
		pathHealed, err = c.waitDataPath(t, base, 90*time.Second)
		pathHealed += healed
	}
	recs := ld.Stop()
	if err != nil {
		t.Errorf("after healing: %v", err)
	}
	if pathHealed > 20*time.Second {
		t.Errorf("checks through every node reached their owners only %v after reconnecting (ring of 3 after %v)", pathHealed.Round(time.Millisecond), healed.Round(time.Millisecond))
	}

	var during, isoElsewhere, majSide []rec
	for _, r := range recs {
		if r.at.Before(tCut) || r.at.After(tHeal) {
			continue
		}
		during = append(during, r)
		if r.via == iso.short {
			if own[r.key] != iso.name {
				isoElsewhere = append(isoElsewhere, r)
			}
		} else {
			majSide = append(majSide, r)
		}
	}
	all, ds, ie, ms := summarize(recs), summarize(during), summarize(isoElsewhere), summarize(majSide)
	t.Logf("partition: whole scenario %s", all)
	t.Logf("partition: during the cut %s", ds)
	t.Logf("partition: isolated side, keys owned elsewhere: %s", ie)
	t.Logf("partition: majority side: %s", ms)
	t.Logf("partition: isolated node alone in its ring after %v (views at heal: isolated %v, n0 %v); majority dropped it after %v; one ring of 3 again %v after reconnecting, every node's checks reaching their owners %v after",
		isoAlone.Round(time.Millisecond), isoView, majView, majorityDropped.Round(time.Millisecond), healed.Round(time.Millisecond), pathHealed.Round(time.Millisecond))
	requireNoErrors(t, all)
	if ie.sources["fallback"] == 0 {
		t.Errorf("the isolated node never answered keys owned elsewhere from fallback")
	}
	if ms.checks == 0 || ie.checks == 0 {
		t.Errorf("a side answered no checks during the cut (majority %d, isolated %d)", ms.checks, ie.checks)
	}
}

// 4. Rolling restart of all 3 under load keeps counters and fails no check.
func rollingRestart(t *testing.T, c *cluster) {
	c.ensureHealthy(t, base...)
	cli := c.allClient(base...)
	counted := client.Limit{Limit: 100, Period: 24 * time.Hour}
	keys := keysN("roll", 12)
	for _, k := range keys {
		for i := 0; i < 60; i++ {
			if _, err := cli.Check(context.Background(), client.Item{Key: k, Limit: counted}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if bad, _ := checkRemaining(t, cli, keys, counted, 40); len(bad) > 0 {
		t.Fatalf("before the restarts: %s", strings.Join(bad, "; "))
	}
	ld := startLoad([]via{{"all", cli}}, keysN("rollload", 20), client.Limit{Limit: 1_000_000, Period: time.Hour}, 4, 2*time.Millisecond)
	defer ld.Stop()
	for _, s := range base {
		n := c.nodes[s]
		t0 := time.Now()
		mustDocker(t, "stop", "-t", "30", n.name)
		stopped := time.Since(t0)
		mustDocker(t, "start", n.name)
		if err := c.waitReady(n, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := c.waitMembers(3, c.names(base...), 60*time.Second); err != nil {
			t.Fatal(err)
		}
		t.Logf("rolling: %s stopped in %v, back and ring of 3 after %v", s, stopped.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	}
	recs := ld.Stop()
	st := summarize(recs)
	bad, byOwner := checkRemaining(t, cli, keys, counted, 40)
	t.Logf("rolling: load %s; counters: %d of %d keys at 40 remaining (owners %v)", st, len(keys)-len(bad), len(keys), byOwner)
	requireNoErrors(t, st)
	if len(bad) > 0 {
		t.Errorf("counters lost: %s", strings.Join(bad, "; "))
	}
}

// 5. Scale 3 -> 5 -> 3 under load: counters kept, new nodes own keys.
func scale(t *testing.T, c *cluster) {
	c.ensureHealthy(t, base...)
	cli := c.allClient(base...)
	counted := client.Limit{Limit: 100, Period: 24 * time.Hour}
	keys := keysN("scale", 30)
	for _, k := range keys {
		for i := 0; i < 60; i++ {
			if _, err := cli.Check(context.Background(), client.Item{Key: k, Limit: counted}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ld := startLoad([]via{{"all", cli}}, keysN("scaleload", 20), client.Limit{Limit: 1_000_000, Period: time.Hour}, 4, 2*time.Millisecond)
	defer ld.Stop()

	five := []string{"n0", "n1", "n2", "n3", "n4"}
	t0 := time.Now()
	c.addNode(3, five)
	c.addNode(4, five)
	if err := c.waitMembers(5, c.names(five...), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	up := time.Since(t0)
	bad, byOwner := checkRemaining(t, cli, keys, counted, 40)
	newOwned := byOwner[c.nodes["n3"].name] + byOwner[c.nodes["n4"].name]
	t.Logf("scale: ring of 5 after %v; %d of %d keys at 40 remaining; owners %v (new nodes own %d)", up.Round(time.Millisecond), len(keys)-len(bad), len(keys), byOwner, newOwned)
	if len(bad) > 0 {
		t.Errorf("at 5 nodes, counters lost: %s", strings.Join(bad, "; "))
	}
	if newOwned == 0 {
		t.Errorf("the new nodes own none of %d keys", len(keys))
	}

	t1 := time.Now()
	mustDocker(t, "stop", "-t", "30", c.nodes["n3"].name, c.nodes["n4"].name)
	if err := c.waitMembers(3, c.names(base...), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	down := time.Since(t1)
	recs := ld.Stop()
	st := summarize(recs)
	bad, byOwner = checkRemaining(t, cli, keys, counted, 40)
	t.Logf("scale: back to 3 after %v; %d of %d keys at 40 remaining; owners %v", down.Round(time.Millisecond), len(keys)-len(bad), len(keys), byOwner)
	t.Logf("scale: load %s", st)
	requireNoErrors(t, st)
	if len(bad) > 0 {
		t.Errorf("at 3 nodes again, counters lost: %s", strings.Join(bad, "; "))
	}
}
