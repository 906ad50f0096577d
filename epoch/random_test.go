package epoch

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"
)

var (
	seedFlag  = flag.Uint64("epoch.seed", 0, "replay this seed of TestRandomSchedules alone")
	seedsFlag = flag.Int("epoch.seeds", 300, "how many seeds TestRandomSchedules runs")
)

// TestRandomSchedules runs seeded schedules of joins, graceful leaves,
// kills, restarts without state, partitions and heals, with message drop
// and delay, checking after every tick that every node applies the same
// epochs (simNet.collect), that no term has two leaders, and that a node
// removed as dead holds no lease past its bound (simNet.check). After the
// schedule everything heals and, unless the schedule killed a majority of
// some configuration's voters, the running nodes must settle into one
// group whose members are exactly them. A failing seed prints its schedule
// and the command that replays it. The schedule replays exactly; Raft's
// election jitter does not (etcd raft draws it from crypto/rand).
func TestRandomSchedules(t *testing.T) {
	seeds := make([]uint64, 0, *seedsFlag)
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for i := range *seedsFlag {
			seeds = append(seeds, uint64(i+1))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			defer func() {
				if t.Failed() {
					t.Logf("replay: go test -race -run 'TestRandomSchedules' ./epoch/ -epoch.seed=%d", seed)
				}
			}()
			runSchedule(t, seed)
		})
	}
}

func runSchedule(t *testing.T, seed uint64) {
	s := newSimNet(t, seed)
	if seed%2 == 0 {
		// LANConfig's proportions (leases longer than two election
		// timeouts) at FastConfig's tick.
		lan := LANConfig("", "")
		s.cfg.ElectionTicks, s.cfg.HeartbeatTicks = lan.ElectionTicks, lan.HeartbeatTicks
		s.cfg.LeaseDuration = lan.LeaseDuration * s.cfg.TickInterval / lan.TickInterval
	}
	r := s.rng
	n0 := 3 + r.IntN(5)
	s.maxDelay = time.Duration(r.IntN(3)) * 20 * time.Millisecond
	s.drop = float64(r.IntN(3)) * 0.02
	initial := names(n0)
	if r.IntN(4) == 0 {
		cut := 1 + r.IntN(n0-1)
		s.partition(initial[:cut], initial[cut:]) // a split start
	}
	for _, n := range initial {
		s.start(n, n0)
	}
	next := n0 + 1
	for range 10 {
		s.run(time.Duration(50+r.IntN(1000)) * time.Millisecond)
		var up, down []string
		for _, name := range s.names {
			switch n := s.nodes[name]; {
			case n.running && !n.left:
				up = append(up, name)
			case !n.running && !n.left:
				down = append(down, name)
			}
		}
		switch ev := r.IntN(10); {
		case ev < 2 && next <= 9:
			s.start(fmt.Sprintf("n%d", next), 3)
			next++
		case ev < 3 && len(up) > 2:
			s.leave(up[r.IntN(len(up))])
		case ev < 5 && len(up) > 2:
			s.kill(up[r.IntN(len(up))])
		case ev < 6 && len(down) > 0:
			s.start(down[r.IntN(len(down))], 3)
		case ev < 8 && len(up) > 1:
			shuffled := slices.Clone(up)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			cut := 1 + r.IntN(len(shuffled)-1)
			s.heal()
			s.partition(shuffled[:cut], shuffled[cut:])
		default:
			s.heal()
		}
	}
	s.heal()
	s.drop = 0
	s.logf("settle")
	for end := s.now.Add(60 * time.Second); !s.settled(); s.step() {
		if s.now.After(end) {
			if !s.quorumSurvives() {
				t.Logf("seed %d: a majority of some configuration's voters was killed; liveness not checked", seed)
				return // safety was checked all along
			}
			s.fatalf("after 60s: not settled into one group of the running nodes\n%s", s.describe())
		}
	}
}

// quorumSurvives reports whether some group still has a majority of its
// voters running (of both halves of a joint configuration), in the
// configuration of its most advanced running node. Asked after the nodes
// had time to apply every entry they can.
func (s *simNet) quorumSurvives() bool {
	best := map[uint64]*machine{}
	for _, n := range s.nodes {
		if n.running && n.m.group != 0 && (best[n.m.group] == nil || n.m.appliedAt > best[n.m.group].appliedAt) {
			best[n.m.group] = n.m
		}
	}
	majority := func(voters []uint64) bool {
		alive := 0
		for _, n := range s.nodes {
			if n.running && !n.left && slices.Contains(voters, n.m.id) {
				alive++
			}
		}
		return 2*alive > len(voters)
	}
	for _, m := range best {
		out := m.cs.GetVotersOutgoing()
		if majority(m.cs.GetVoters()) && (len(out) == 0 || majority(out)) {
			return true
		}
	}
	return false
}
