package node_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/node"
)

// A single node with no join list and no cluster authentication (the
// quickstart: no flag) is a group of one: it founds the group at New,
// leads it, applies epoch 1 (its own join), holds a lease, and shows it
// in the Membership API and /metrics. A node with a join list founds
// nothing by itself (the default --bootstrap-expect is at least 2).
func TestEpochsSingleNodeIsAGroupOfOne(t *testing.T) {
	n := startNode(t, nil)
	waitFor(t, 10*time.Second, "a group of one with its lease", func() bool {
		s := node.Epochs(n)
		return s.Group != 0 && s.Leader && s.Epoch == 1 && s.LeaseValid && slices.Equal(s.Members, []string{"n1"})
	})
	if s := node.Epochs(n); s.Change != "join n1" || !slices.Equal(s.Voters, []string{"n1"}) || s.Lead != "n1" {
		t.Fatalf("epoch state %+v, want epoch 1 = join n1, n1 the one voter and leader", s)
	}
	waitFor(t, 10*time.Second, "the Membership API shows n1 leading epoch 1", func() bool {
		ms := n.Members()
		return len(ms) == 1 && ms[0].RaftRole == "leader" && ms[0].Epoch == 1 && ms[0].RaftGroup == node.Epochs(n).Group
	})
	lines := scrape(t, n)
	for prefix, want := range map[string]string{"sluice_epoch_applied": "1", "sluice_epoch_leader": "1",
		"sluice_epoch_lease_valid": "1", "sluice_epoch_voters": "1", "sluice_epoch_learners": "0"} {
		if got := sample(lines, prefix); got != want {
			t.Errorf("%s = %q, want %q", prefix, got, want)
		}
	}

	joiner, err := node.New(withSecret(t, node.LocalConfig("j"), []string{"127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer joiner.Close()
	if s := node.Epochs(joiner); s.Group != 0 || s.Epoch != 0 {
		t.Fatalf("a node with a join list founded a group at New: %+v", s)
	}
}

// withSecret gives cfg a new cluster secret and the join list join.
func withSecret(t *testing.T, cfg node.Config, join []string) node.Config {
	cfg.ClusterSecretFile = writeSecret(t, t.TempDir())
	cfg.Join = join
	return cfg
}

// A bad --bootstrap-expect is refused by New, naming the field.
func TestEpochsBootstrapExpectRefused(t *testing.T) {
	for _, v := range []int{-1, -100} {
		cfg := node.LocalConfig("n")
		cfg.BootstrapExpect = v
		n, err := node.New(cfg)
		if err == nil {
			n.Close()
			t.Fatalf("BootstrapExpect %d accepted", v)
		}
		if !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), "BootstrapExpect") {
			t.Errorf("BootstrapExpect %d: %v, want ErrInvalidConfig naming BootstrapExpect", v, err)
		}
	}
}

// gossipAddrs draws n loopback addresses free for TCP and UDP (memberlist
// binds both), so that every node can be given the same join list, its
// own address included, before any is built.
func gossipAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range 200 {
		if len(out) == n {
			return out
		}
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil || slices.Contains(out, addr) {
			continue
		}
		pc.Close()
		out = append(out, addr)
	}
	t.Fatalf("no %d free gossip addresses", n)
	return nil
}

// agreed waits until every node of nodes applied the same epoch of one
// group, whose ring is exactly want (names), with exactly one leader among
// them, and routes by that ring, and returns that epoch's state as the
// first node knows it.
func agreed(t *testing.T, nodes []*node.Node, want []string, what string) node.EpochState {
	t.Helper()
	var last []node.EpochState
	deadline := time.Now().Add(20 * time.Second)
	for {
		last = last[:0]
		leaders := 0
		ok := true
		for _, n := range nodes {
			s := node.Epochs(n)
			last = append(last, s)
			if s.Leader {
				leaders++
			}
			if s.Group == 0 || s.Group != last[0].Group || s.Epoch != last[0].Epoch || !slices.Equal(s.Members, want) {
				ok = false
			}
		}
		if ok && leaders == 1 && routedBy(nodes, want) {
			return last[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no agreement on %v after 20s: %+v", what, want, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// routedBy reports whether every node's limiter ring is exactly want:
// the nodes route by the agreed ring of the epoch they applied.
func routedBy(nodes []*node.Node, want []string) bool {
	for _, n := range nodes {
		r := n.Limiter().Ring()
		if r == nil || r.Len() != len(want) {
			return false
		}
		for _, name := range want {
			if _, ok := r.Member(name); !ok {
				return false
			}
		}
	}
	return true
}

// Three nodes given the same join list (their own address included, the
// default --bootstrap-expect 3) found one group: one leader, three voters,
// the same epoch on each listing all three, shown by the Membership API.
// A fourth node that joins is added as a learner (four members keep three
// voters) in an epoch every node applies. A graceful leave of the leader
// is an epoch on the others, applied by all, with a new leader and the
// learner promoted to keep three voters.
func TestEpochsOneGroupJoinAndLeave(t *testing.T) {
	tc := newTestCluster(t, 0)
	addrs := gossipAddrs(t, 3)
	for i, addr := range addrs {
		tc.addWith(fmt.Sprintf("n%d", i), func(c *node.Config) {
			c.GossipAddr = addr
			c.Join = addrs
		})
	}
	tc.waitConverged()
	three := []string{"n0", "n1", "n2"}
	s := agreed(t, tc.nodes, three, "three nodes")
	// The limiter's epoch (what its peer calls carry, docs/cluster.md
	// "Epochs on peer calls") is the epoch of the ring it routes by.
	waitFor(t, 10*time.Second, "every limiter at the agreed epoch", func() bool {
		for _, n := range tc.nodes {
			if n.Limiter().Epoch() != s.Epoch {
				return false
			}
		}
		return true
	})
	// Promotions make no epoch: the learners become voters after.
	waitFor(t, 10*time.Second, "three voters", func() bool {
		for _, n := range tc.nodes {
			if st := node.Epochs(n); len(st.Voters) != 3 || len(st.Learners) != 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, 10*time.Second, "every node's Membership API shows one leader, two voters and the epoch", func() bool {
		for _, n := range tc.nodes {
			roles := map[string]int{}
			for _, m := range n.Members() {
				if m.Epoch != s.Epoch || m.RaftGroup != s.Group {
					return false
				}
				roles[m.RaftRole]++
			}
			if roles["leader"] != 1 || roles["voter"] != 2 {
				return false
			}
		}
		return true
	})

	n3 := tc.add("n3")
	// A joiner is ready only once it routes by an applied epoch that adds
	// it (gossip's view alone does not make it ready).
	waitFor(t, 20*time.Second, "n3 ready", n3.Ready)
	if st := node.Epochs(n3); !slices.Contains(st.Members, "n3") {
		t.Fatalf("n3 ready at epoch %d, which lists %v", st.Epoch, st.Members)
	}
	tc.waitConverged()
	four := []string{"n0", "n1", "n2", "n3"}
	s = agreed(t, tc.nodes, four, "a fourth joined")
	if !slices.Contains(s.Learners, "n3") || len(s.Voters) != 3 {
		t.Fatalf("four members: voters %v, learners %v; want n3 a learner beside three voters", s.Voters, s.Learners)
	}
	if s.Epoch < 4 {
		t.Fatalf("epoch %d after three joins and a fourth", s.Epoch)
	}

	var leader string
	for _, n := range tc.nodes {
		if node.Epochs(n).Leader {
			leader = n.Name()
		}
	}
	before := s.Epoch
	tc.stop(leader)
	rest := slices.DeleteFunc(slices.Clone(four), func(n string) bool { return n == leader })
	s = agreed(t, tc.nodes, rest, "the leader left")
	// A leave, as gossip reports it: the leaving flag of the leaver's
	// metadata may lose the race with memberlist's leave message at the
	// node that becomes leader, which then records (and removes) it as
	// dead; either way one epoch removes it.
	if s.Epoch != before+1 || s.Change != "leave "+leader && s.Change != "dead "+leader {
		t.Fatalf("after %s left: epoch %d (%s), want epoch %d removing %s", leader, s.Epoch, s.Change, before+1, leader)
	}
	t.Logf("the leave of %s: epoch %d, %s", leader, s.Epoch, s.Change)
	waitFor(t, 10*time.Second, "three voters again", func() bool {
		st := node.Epochs(tc.nodes[0])
		return len(st.Voters) == 3 && len(st.Learners) == 0
	})
}

// Two nodes: the founder is the one voter and the joiner a learner. The
// voter's graceful leave must still end in an epoch the other applies, a
// group of one it leads: the leaver promotes the learner, hands it the
// leadership and stays until the group went on without it (its vote is
// needed to commit its own removal from two voters).
func TestEpochsTwoNodesVoterLeaves(t *testing.T) {
	tc := newTestCluster(t, 0)
	tc.addWith("n0", func(c *node.Config) { c.LeaveLinger = 0 }) // no linger to lean on
	tc.add("n1")
	tc.waitConverged()
	s := agreed(t, tc.nodes, []string{"n0", "n1"}, "two nodes")
	if !slices.Equal(s.Voters, []string{"n0"}) || !slices.Equal(s.Learners, []string{"n1"}) {
		t.Fatalf("two members: voters %v, learners %v; want n0 the voter, n1 a learner", s.Voters, s.Learners)
	}
	tc.stop("n0")
	s = agreed(t, tc.nodes, []string{"n1"}, "n0 left")
	if s.Change != "leave n0" && s.Change != "dead n0" || !s.Leader || !slices.Equal(s.Voters, []string{"n1"}) {
		t.Fatalf("after n0 left: %+v, want an epoch removing n0, n1 the one voter and leader", s)
	}
	waitFor(t, 10*time.Second, "n1 holds a lease alone", func() bool { return node.Epochs(tc.nodes[0]).LeaseValid })
}
