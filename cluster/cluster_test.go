package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/cluster"
)

// startChain starts n nodes on 127.0.0.1:0, node i joining node i-1, so
// that knowledge of the first nodes must travel by gossip.
func startChain(t *testing.T, n int) ([]*testNode, map[string]cluster.NodeMeta) {
	t.Helper()
	var nodes []*testNode
	meta := map[string]cluster.NodeMeta{}
	for i := range n {
		var join []string
		if i > 0 {
			join = []string{nodes[i-1].GossipAddr()}
		}
		cfg := localConfig(fmt.Sprintf("node-%d", i), join...)
		cfg.Meta = cluster.NodeMeta{GRPCAddr: "127.0.0.1:" + strconv.Itoa(9000+i), Version: "v1." + strconv.Itoa(i)}
		meta[cfg.NodeName] = cfg.Meta
		nodes = append(nodes, startNode(t, cfg))
	}
	return nodes, meta
}

func TestConverges(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			start := time.Now()
			nodes, meta := startChain(t, size)
			waitFor(t, 10*time.Second, "every node lists every node with its metadata", func() bool {
				return converged(nodes, nodes, meta)
			})
			t.Logf("%d nodes converged %v after the first was created", size, time.Since(start).Round(time.Millisecond))

			// Several nodes share 127.0.0.1, each on its own port.
			seen := map[string]bool{}
			for _, n := range nodes {
				if seen[n.GossipAddr()] {
					t.Fatalf("gossip address %s used twice", n.GossipAddr())
				}
				seen[n.GossipAddr()] = true
			}
			// OnChange saw the final membership too, with increasing versions.
			for _, n := range nodes {
				waitFor(t, 2*time.Second, n.LocalName()+"'s OnChange sees everyone", func() bool {
					got := n.received()
					return len(got) > 0 && len(got[len(got)-1].Members) == size
				})
				checkVersions(t, n)
			}
		})
	}
}

// checkVersions checks that n's OnChange received strictly increasing
// versions, the last being the current snapshot's.
func checkVersions(t *testing.T, n *testNode) {
	t.Helper()
	got := n.received()
	for i := 1; i < len(got); i++ {
		if got[i].Version <= got[i-1].Version {
			t.Fatalf("%s: OnChange versions not increasing: %d then %d", n.LocalName(), got[i-1].Version, got[i].Version)
		}
	}
}

func TestSnapshotBeforeRun(t *testing.T) {
	cfg := localConfig("solo")
	cfg.Meta.GRPCAddr = "127.0.0.1:1234"
	n := newNode(t, cfg)
	s := n.Snapshot()
	if s.Version != 1 || len(s.Members) != 1 {
		t.Fatalf("Snapshot = %+v, want version 1 with this node only", s)
	}
	m := s.Members[0]
	want := cluster.Member{Name: "solo", GossipAddr: n.GossipAddr(), GRPCAddr: "127.0.0.1:1234", State: cluster.Alive}
	if m != want {
		t.Fatalf("member = %+v, want %+v", m, want)
	}
	if host, port, _ := netSplit(n.GossipAddr()); host != "127.0.0.1" || port == "0" {
		t.Fatalf("GossipAddr = %q, want 127.0.0.1 with the bound port", n.GossipAddr())
	}
	if st, ok := n.State("solo"); !ok || st != cluster.Alive {
		t.Fatalf("State(solo) = %v, %v", st, ok)
	}
	if _, ok := n.State("nobody"); ok {
		t.Fatal("State(nobody) found")
	}

	// Run delivers the current snapshot first.
	n.run()
	waitFor(t, 2*time.Second, "OnChange gets the first snapshot", func() bool { return len(n.received()) == 1 })
	if got := n.received()[0]; got.Version != 1 {
		t.Fatalf("first OnChange version = %d, want 1", got.Version)
	}
}

func TestJoinRetriesUntilSeedIsUp(t *testing.T) {
	port := reservePort(t)
	b := startNode(t, localConfig("b", addr(port)))
	waitFor(t, 5*time.Second, "b failed to join a few times", func() bool {
		return b.logs.count("cluster: join attempt failed") >= 3
	})
	if got := len(b.Snapshot().Members); got != 1 {
		t.Fatalf("b lists %d members before a is up", got)
	}

	cfg := localConfig("a")
	cfg.BindAddr = addr(port)
	a := startNode(t, cfg)
	if a.GossipAddr() != addr(port) {
		t.Fatalf("a.GossipAddr() = %s, want %s", a.GossipAddr(), addr(port))
	}
	d := waitFor(t, 5*time.Second, "a and b see each other", func() bool {
		return converged([]*testNode{a, b}, []*testNode{a, b}, nil)
	})
	t.Logf("converged %v after the seed came up", d.Round(time.Millisecond))
	// The push/pull that makes b see a happens inside memberlist's Join,
	// before Join returns and b logs it: wait for the log line.
	waitFor(t, 5*time.Second, "b logs its join", func() bool { return b.logs.count("cluster: joined") >= 1 })
	if b.logs.count("cluster: joined") != 1 {
		t.Fatalf("b logged %d joins", b.logs.count("cluster: joined"))
	}
}

func TestJoinByDNSName(t *testing.T) {
	a := startNode(t, localConfig("a"))
	_, port, _ := netSplit(a.GossipAddr())
	// "localhost" resolves to 127.0.0.1 and, often, ::1 (where nothing
	// listens): every address is tried and one answering is enough.
	b := startNode(t, localConfig("b", "localhost:"+port))
	waitFor(t, 5*time.Second, "a and b see each other", func() bool {
		return converged([]*testNode{a, b}, []*testNode{a, b}, nil)
	})
}

func TestStatefulSetStart(t *testing.T) {
	// Every member of a StatefulSet gets the same seeds, itself included,
	// and they all start at once.
	ports := []int{reservePort(t), reservePort(t), reservePort(t)}
	var seeds []string
	for _, p := range ports {
		seeds = append(seeds, addr(p))
	}

	// Alone, the first one keeps retrying rather than "joining" itself.
	cfg := localConfig("pod-0", seeds...)
	cfg.BindAddr = seeds[0]
	first := startNode(t, cfg)
	waitFor(t, 5*time.Second, "pod-0 retries rather than joining itself", func() bool {
		return first.logs.count("cluster: join attempt failed") >= 2
	})

	all := []*testNode{first}
	for i := 1; i < len(ports); i++ {
		cfg := localConfig("pod-"+strconv.Itoa(i), seeds...)
		cfg.BindAddr = seeds[i]
		all = append(all, newNode(t, cfg))
	}
	start := time.Now()
	for _, n := range all[1:] {
		n.run()
	}
	waitFor(t, 10*time.Second, "all pods see each other", func() bool { return converged(all, all, nil) })
	t.Logf("converged %v after starting the other pods", time.Since(start).Round(time.Millisecond))
}

func TestRejoinMergesSeparateClusters(t *testing.T) {
	// x's seeds are a (up) and c (not yet): x joins a and stops retrying;
	// c then starts alone, and x's rejoin brings it in.
	a := startNode(t, localConfig("a"))
	pc := reservePort(t)
	cfgX := localConfig("x", a.GossipAddr(), addr(pc))
	cfgX.Rejoin = 200 * time.Millisecond
	x := startNode(t, cfgX)
	waitFor(t, 5*time.Second, "x joins a", func() bool {
		return converged([]*testNode{a, x}, []*testNode{a, x}, nil)
	})

	cfgC := localConfig("c")
	cfgC.BindAddr = addr(pc)
	c := startNode(t, cfgC)
	all := []*testNode{a, x, c}
	d := waitFor(t, 10*time.Second, "the two clusters merge", func() bool { return converged(all, all, nil) })
	t.Logf("merged %v after c started", d.Round(time.Millisecond))
}

func TestLeave(t *testing.T) {
	nodes, meta := startChain(t, 3)
	waitFor(t, 10*time.Second, "convergence", func() bool { return converged(nodes, nodes, meta) })
	leaver, stay := nodes[1], []*testNode{nodes[0], nodes[2]}

	start := time.Now()
	if err := leaver.Leave(2 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := leaver.Leave(time.Second); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	// The leaver drops itself at once, so that its ring shows where its
	// keys go.
	if _, ok := leaver.Snapshot().Member(leaver.LocalName()); ok {
		t.Fatal("the leaver still lists itself")
	}
	if st, _ := leaver.State(leaver.LocalName()); st != cluster.Left {
		t.Fatalf("leaver's own state = %v, want left", st)
	}
	waitFor(t, 5*time.Second, "the others drop the leaver", func() bool {
		return converged(stay, stay, meta)
	})
	t.Logf("others dropped the leaver %v after Leave was called", time.Since(start).Round(time.Millisecond))
	for _, n := range stay {
		if st, ok := n.State(leaver.LocalName()); !ok || st != cluster.Left {
			t.Fatalf("%s: State(leaver) = %v, %v, want left", n.LocalName(), st, ok)
		}
		waitFor(t, 2*time.Second, n.LocalName()+"'s OnChange sees the leave", func() bool {
			got := n.received()
			_, listed := got[len(got)-1].Member(leaver.LocalName())
			return !listed
		})
		checkVersions(t, n)
	}

	leaver.stop()
	if err := leaver.Leave(time.Second); !errors.Is(err, cluster.ErrShutdown) {
		t.Fatalf("Leave after Shutdown = %v, want ErrShutdown", err)
	}
}

func TestCrashIsDetected(t *testing.T) {
	nodes, meta := startChain(t, 3)
	waitFor(t, 10*time.Second, "convergence", func() bool { return converged(nodes, nodes, meta) })
	crashed, stay := nodes[2], nodes[:2]

	start := time.Now()
	crashed.stop() // Shutdown without Leave
	waitFor(t, 15*time.Second, "the others drop the crashed node", func() bool {
		return converged(stay, stay, meta)
	})
	t.Logf("others dropped the crashed node %v after its shutdown", time.Since(start).Round(time.Millisecond))
	for _, n := range stay {
		if st, ok := n.State(crashed.LocalName()); !ok || st != cluster.Dead {
			t.Fatalf("%s: State(crashed) = %v, %v, want dead", n.LocalName(), st, ok)
		}
		checkVersions(t, n)
	}
}

func TestUpdateMeta(t *testing.T) {
	nodes, meta := startChain(t, 2)
	waitFor(t, 10*time.Second, "convergence", func() bool { return converged(nodes, nodes, meta) })
	nm := cluster.NodeMeta{GRPCAddr: "127.0.0.1:7777", PeerAddr: "127.0.0.1:7778", Version: "v2", PolicyHash: "0123456789abcdef"}
	if err := nodes[1].UpdateMeta(nm, 2*time.Second); err != nil {
		t.Fatalf("UpdateMeta: %v", err)
	}
	meta[nodes[1].LocalName()] = nm
	waitFor(t, 5*time.Second, "the other node sees the new metadata", func() bool {
		return converged(nodes, nodes, meta)
	})

	// A wait too short for any gossip round is ErrMetaNotConfirmed, and
	// the change still reaches the other node.
	nm.Version = "v3"
	if err := nodes[1].UpdateMeta(nm, time.Nanosecond); !errors.Is(err, cluster.ErrMetaNotConfirmed) {
		t.Fatalf("UpdateMeta(1ns) = %v, want ErrMetaNotConfirmed", err)
	}
	meta[nodes[1].LocalName()] = nm
	waitFor(t, 5*time.Second, "the other node sees the metadata whose broadcast was not confirmed", func() bool {
		return converged(nodes, nodes, meta)
	})

	var ce *cluster.ConfigError
	if err := nodes[1].UpdateMeta(cluster.NodeMeta{GRPCAddr: "no-port"}, time.Second); !errors.As(err, &ce) || ce.Field != "Meta.GRPCAddr" || !errors.Is(err, cluster.ErrInvalidConfig) {
		t.Fatalf("UpdateMeta(bad) = %v, want a ConfigError for Meta.GRPCAddr", err)
	}
}

func TestLifecycle(t *testing.T) {
	n := startNode(t, localConfig("n"))
	waitFor(t, 2*time.Second, "Run started", func() bool { return len(n.received()) > 0 })
	if err := n.Run(t.Context()); err == nil {
		t.Fatal("second Run returned nil")
	}
	// Shutdown makes Run return nil, and is idempotent.
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-n.runErr:
		if err != nil {
			t.Fatalf("Run after Shutdown returned %v", err)
		}
		n.cancel()
		n.cancel = nil // Run has returned
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Shutdown")
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := n.UpdateMeta(cluster.NodeMeta{}, time.Second); !errors.Is(err, cluster.ErrShutdown) {
		t.Fatalf("UpdateMeta after Shutdown = %v", err)
	}

	m := newNode(t, localConfig("m"))
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(t.Context()); !errors.Is(err, cluster.ErrShutdown) {
		t.Fatalf("Run after Shutdown = %v, want ErrShutdown", err)
	}
}

func TestBindConflict(t *testing.T) {
	a := newNode(t, localConfig("a"))
	cfg := localConfig("b")
	cfg.BindAddr = a.GossipAddr()
	if c, err := cluster.New(cfg); err == nil {
		_ = c.Shutdown()
		t.Fatal("New on a port in use succeeded")
	}
}

func TestBindAllInterfaces(t *testing.T) {
	// Bound to 0.0.0.0, a node advertises AdvertiseAddr with its real port,
	// and skips its own loopback address among the seeds.
	cfg := localConfig("a")
	cfg.BindAddr = "0.0.0.0:0"
	cfg.AdvertiseAddr = "127.0.0.1:0"
	a := newNode(t, cfg)
	host, port, _ := netSplit(a.GossipAddr())
	if host != "127.0.0.1" || port == "0" {
		t.Fatalf("GossipAddr = %s, want 127.0.0.1 with the bound port", a.GossipAddr())
	}
	a.Cluster.Shutdown()

	p := reservePort(t)
	cfg = localConfig("a", addr(p))
	cfg.BindAddr = "0.0.0.0:" + strconv.Itoa(p)
	cfg.AdvertiseAddr = "127.0.0.1:0"
	a = startNode(t, cfg)
	waitFor(t, 5*time.Second, "a retries rather than joining itself", func() bool {
		return a.logs.count("cluster: join attempt failed") >= 2
	})
	b := startNode(t, localConfig("b", a.GossipAddr()))
	waitFor(t, 5*time.Second, "a and b see each other", func() bool {
		return converged([]*testNode{a, b}, []*testNode{a, b}, nil)
	})
}

// A node whose name a live member already has, at another address, does
// not join: its Run returns ErrNameTaken naming the name and the member's
// address, whichever member it joins through, and the cluster keeps the
// first node of that name.
func TestDuplicateNameRefused(t *testing.T) {
	a := startNode(t, localConfig("a"))
	b := startNode(t, localConfig("b", a.GossipAddr()))
	waitFor(t, 5*time.Second, "a and b see each other", func() bool {
		return converged([]*testNode{a, b}, []*testNode{a, b}, nil)
	})
	for _, seed := range []*testNode{a, b} {
		impostor := newNode(t, localConfig("a", seed.GossipAddr()))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := impostor.Run(ctx)
		cancel()
		if !errors.Is(err, cluster.ErrNameTaken) {
			t.Fatalf("joining through %s: Run = %v, want ErrNameTaken", seed.LocalName(), err)
		}
		for _, want := range []string{`NodeName "a"`, a.GossipAddr(), impostor.GossipAddr()} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("joining through %s: %q does not name %s", seed.LocalName(), err, want)
			}
		}
		t.Logf("through %s: %v", seed.LocalName(), err)
		if impostor.Joined() {
			t.Errorf("joining through %s: the impostor reports joined", seed.LocalName())
		}
		if !converged([]*testNode{a, b}, []*testNode{a, b}, nil) {
			t.Fatalf("joining through %s: a and b no longer list each other alone: a %+v, b %+v",
				seed.LocalName(), a.Snapshot().Members, b.Snapshot().Members)
		}
		if n := len(impostor.Snapshot().Members); n != 1 {
			t.Errorf("joining through %s: the impostor lists %d members, want itself alone", seed.LocalName(), n)
		}
	}
	// b merged the impostor's push (only a refuses a claim to its own
	// name), and its conflict delegate reported the second "a".
	const msg = "cluster: two nodes use one name; the second is ignored while the first is alive"
	waitFor(t, 5*time.Second, "b reports the conflict", func() bool { return b.logs.count(msg) > 0 })
	if m, _ := b.Snapshot().Member("a"); m.GossipAddr != a.GossipAddr() {
		t.Fatalf("b lists a at %s, want the first one's %s", m.GossipAddr, a.GossipAddr())
	}
}

// A node joining a cluster of 6 through one seed learns the members in one
// push/pull, one NotifyJoin at a time: OnChange still gets them in one
// snapshot (Config.Settle), never a ring with only some of them, which
// would make the joiner serve keys without their counters. That includes
// a member the seed's memberlist suspects at that moment, which a starved
// machine makes common (TestJoinListsAMemberTheSeedSuspects makes it
// certain).
//
// The test holds on a machine loaded many times over its cores, where
// members are declared dead and come back all along (even with the lan
// preset's failure detector, which the nodes run): the joiner's first
// snapshot must list every running member its seed listed (a departed
// one the seed still lists may be left out: see the package
// documentation, "Seeds and Kubernetes"), and a join during which one of
// them left the seed's membership or came back (its log says) proves
// nothing and is tried again, at another seed, by another joiner. Each
// joiner leaves after its round without waiting for the others to hear
// it (a starved cluster takes tens of seconds), so that the cluster stays
// small. Each node of the cluster joins every node before it, so that
// every member learns every other over TCP push/pull rather than by
// gossip, which a starved node may miss until the lan preset's next
// push/pull, 30s on.
func TestJoinDeliversTheWholeMembership(t *testing.T) {
	const (
		size     = 6
		want     = 3  // joins that saw the members holding still
		attempts = 12 // joins tried at most
	)
	var (
		nodes []*testNode
		addrs []string
	)
	for i := range size {
		n := startNode(t, withLAN(localConfig(fmt.Sprintf("node-%d", i), addrs...)))
		nodes = append(nodes, n)
		addrs = append(addrs, n.GossipAddr())
	}
	waitFor(t, 60*time.Second, "the members list each other", func() bool { return listed(nodes, nodes) })
	// running lists the members of s that run (not former joiners).
	running := func(s cluster.Snapshot) []string {
		var ns []string
		for _, m := range s.Members {
			if strings.HasPrefix(m.Name, "node-") {
				ns = append(ns, m.Name)
			}
		}
		return ns
	}
	// changes counts the seed's records of members joining and leaving.
	changes := func(seed *testNode) int {
		sum := 0
		for _, n := range nodes {
			sum += seed.logs.count("cluster: member joined "+n.LocalName()) + seed.logs.count("cluster: member left "+n.LocalName())
		}
		return sum
	}
	clean := 0
	for round := 0; round < attempts && clean < want; round++ {
		seed := nodes[round%size]
		before, changed := running(seed.Snapshot()), changes(seed)
		j := startNode(t, withLAN(localConfig(fmt.Sprintf("joiner-%d", round), seed.GossipAddr())))
		var first cluster.Snapshot
		waitFor(t, 60*time.Second, "the joiner delivers a snapshot after its join", func() bool {
			for _, s := range j.received() {
				if len(s.Members) > 1 {
					first = s
					return true
				}
			}
			return false
		})
		if after := running(seed.Snapshot()); !slices.Equal(before, after) || changes(seed) != changed {
			t.Logf("round %d: %s's members changed during the join (%v, then %v): not counted", round, seed.LocalName(), before, after)
		} else {
			clean++
			var missing []string
			for _, n := range slices.Concat(before, []string{j.LocalName()}) {
				if _, ok := first.Member(n); !ok {
					missing = append(missing, n)
				}
			}
			if len(missing) > 0 {
				var got []string
				for _, m := range first.Members {
					got = append(got, m.Name)
				}
				t.Fatalf("round %d: the joiner's first snapshot after its join through %s (version %d) lacks %v: it lists %v, %s %v; "+
					"the joiner contacted the seed's suspects %d times, and %d of them did not answer",
					round, seed.LocalName(), first.Version, missing, got, seed.LocalName(), before,
					j.logs.count("cluster: contacted the members the seed suspects"), j.logs.count("cluster: a member the seed suspects did not answer"))
			}
		}
		_ = j.Leave(time.Second) // a timeout is no failure: the others learn it from their failure detectors
		j.stop()
	}
	if clean == 0 {
		t.Fatalf("the members changed during each of %d joins: no join was checked", attempts)
	}
	t.Logf("%d joins checked", clean)
}

// withLAN returns cfg with the lan preset.
func withLAN(cfg cluster.Config) cluster.Config {
	cfg.Preset = cluster.PresetLAN
	return cfg
}

// A node that crashed and comes back under its name at a new address (a
// pod rescheduled with a new IP) is listed at the new address soon after
// the old one is declared dead, not after memberlist forgets the dead
// node (GossipToTheDeadTime, 5s in the local preset, counted from the
// death: the deadline below is well inside it).
func TestRestartAtNewAddressReclaimsName(t *testing.T) {
	a := startNode(t, localConfig("a"))
	c := startNode(t, localConfig("c", a.GossipAddr()))
	b := newNode(t, localConfig("b", a.GossipAddr()))
	b.run()
	waitFor(t, 5*time.Second, "a, b and c see each other", func() bool {
		return converged([]*testNode{a, b, c}, []*testNode{a, b, c}, nil)
	})
	b.stop() // no Leave: a crash
	waitFor(t, 10*time.Second, "a and c declare b dead", func() bool {
		sa, _ := a.State("b")
		sc, _ := c.State("b")
		return sa == cluster.Dead && sc == cluster.Dead
	})
	b2 := startNode(t, localConfig("b", a.GossipAddr()))
	if b2.GossipAddr() == b.GossipAddr() {
		t.Fatalf("b came back at its old address %s", b.GossipAddr())
	}
	d := waitFor(t, 3500*time.Millisecond, "a and c list b at its new address", func() bool {
		for _, n := range []*testNode{a, c} {
			if m, ok := n.Snapshot().Member("b"); !ok || m.GossipAddr != b2.GossipAddr() {
				return false
			}
		}
		return true
	})
	t.Logf("b listed at its new address %v after it started", d.Round(time.Millisecond))
}
