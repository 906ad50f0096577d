package ownership_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter/ownership"
	"github.com/sluice-rl/sluice/ring"
)

var (
	seedFlag      = flag.Uint64("seed", 0, "TestSim: replay only this schedule (also OWNERSHIP_SIM_SEED)")
	schedulesFlag = flag.Int("schedules", 0, "TestSim: how many schedules (also OWNERSHIP_SIM_SCHEDULES; default 300)")
)

// Virtual time of the simulation.
const (
	simStep        = 5 * time.Millisecond
	simLease       = 60 * time.Millisecond // a lease renewal lasts this long
	simDeadWait    = simLease              // DeadOwnerWait: no clock drift here
	simDetect      = 25 * time.Millisecond // unseen this long: removed as Dead (lease still valid)
	simSteps       = 300                   // steps of faults and load
	simSettleSteps = 600                   // most steps to settle after healing
	simKeys        = 192
	simLimit       = 6
	simPartitions  = 64
	simTickEvery   = 4
)

var simRingConfig = ring.Config{PartitionCount: simPartitions, ReplicationFactor: 16, Load: 1.25}

// TestSim runs seeded schedules of joins, leaves, kills, restarts and
// network faults under load, checking the invariants after every step.
// A failing seed prints its schedule and replays with -seed.
func TestSim(t *testing.T) {
	seeds, verbose := simSeeds(t)
	start := time.Now()
	stats := simStats{}
	rings := ringCache{}
	for _, seed := range seeds {
		s := newSim(seed, verbose, rings)
		err := s.run()
		stats.add(s)
		if err == nil {
			continue
		}
		again := newSim(seed, false, rings).run()
		same := again != nil && again.Error() == err.Error()
		t.Fatalf("seed %d: %v\nreplays to the same failure: %v\nschedule:\n%s\nreplay: go test ./limiter/ownership/ -run 'TestSim$' -seed %d -v",
			seed, err, same, strings.Join(s.trace, "\n"), seed)
	}
	t.Logf("%d schedules in %v: %s", len(seeds), time.Since(start).Round(time.Millisecond), stats)
}

func simSeeds(t *testing.T) (seeds []uint64, verbose bool) {
	seed := *seedFlag
	if v := os.Getenv("OWNERSHIP_SIM_SEED"); v != "" && seed == 0 {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("OWNERSHIP_SIM_SEED: %v", err)
		}
	}
	if seed != 0 {
		return []uint64{seed}, testing.Verbose()
	}
	n := *schedulesFlag
	if v := os.Getenv("OWNERSHIP_SIM_SCHEDULES"); v != "" && n == 0 {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("OWNERSHIP_SIM_SCHEDULES: %v", err)
		}
	}
	if n == 0 {
		n = 300
	}
	for i := range n {
		seeds = append(seeds, uint64(i)+1)
	}
	return seeds, false
}

type simStats struct {
	schedules, withDead, decided, admitted, lost, epochs, waits, fallbacks int
	lostEmpty, lostPartial                                                 int
	worst                                                                  float64
}

func (st *simStats) add(s *sim) {
	st.schedules++
	if s.deadEpochs > 0 {
		st.withDead++
	}
	st.decided += s.decided
	st.lostEmpty += s.lostEmpty
	st.lostPartial += s.lostPartial
	st.waits += s.waits
	st.fallbacks += s.fallbacks
	st.epochs += len(s.log) - 1
	for k, v := range s.truth {
		st.admitted += v
		st.lost += s.loss[k]
		st.worst = max(st.worst, float64(v)/simLimit)
	}
}

func (st simStats) String() string {
	return fmt.Sprintf("%d with a Dead epoch; %d epochs; %d checks decided, %d admitted, %d of them counted from an heir's copy that lacked them; worst key %.2fx its limit; %d checks waited, %d fell back; lacked by copies without the key %d, with an older count %d",
		st.withDead, st.epochs, st.decided, st.admitted, st.lost, st.worst, st.waits, st.fallbacks, st.lostEmpty, st.lostPartial)
}

// simNode is one process: the machine, its store and its heir copies.
type simNode struct {
	name    string
	m       *ownership.Node
	running bool // not killed, not exited
	applied int  // index in sim.log of the latest epoch applied
	store   map[int]map[uint64]int
	replica map[int]map[uint64]int
	rebase  map[int]bool // the store's states of p came from an heir's copy
	seen    time.Time    // the oracle last reached it
}

// payload is what a MsgDone carries in the simulation.
type payload struct {
	counts map[uint64]int
	rebase bool
}

type packet struct {
	at   time.Time
	from string
	to   string
	msg  *ownership.Message
	repl *replication
}

type replication struct {
	p      int
	counts map[uint64]int
}

type sim struct {
	seed     uint64
	rings    ringCache
	rng      *rand.Rand
	now      time.Time
	verbose  bool
	trace    []string
	nodes    []*simNode
	byName   map[string]*simNode
	log      []ownership.Epoch
	inflight []packet
	cut      map[[2]string]bool // one-way cuts, from -> to; "raft" is the epoch layer
	dropRate float64
	dupRate  float64 // packets delivered twice, the copy late
	kills    bool    // this schedule kills and declares nodes dead
	nextName int

	truth, loss map[uint64]int
	deadEpochs  int
	decided     int
	waits       int
	fallbacks   int
	settling    bool
	// what heirs' copies lacked, by whether they had the key at all
	lostEmpty, lostPartial int
}

// ringCache keeps the rings and heirs of member sets (by their names
// joined), which schedules share: building them is most of a schedule's
// cost.
type ringCache map[string]ownership.Epoch

func (c ringCache) get(members []string) ownership.Epoch {
	key := strings.Join(members, ",")
	if e, ok := c[key]; ok {
		return e
	}
	ms := make([]ring.Member, len(members))
	for i, name := range members {
		ms[i] = ring.Member{Name: name}
	}
	r, err := ring.New(simRingConfig, ms)
	if err != nil {
		panic(err)
	}
	h, err := r.Heirs(2)
	if err != nil {
		panic(err)
	}
	c[key] = ownership.Epoch{Ring: r, Heirs: h}
	return c[key]
}

func newSim(seed uint64, verbose bool, rings ringCache) *sim {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	s := &sim{
		seed: seed, rng: rng, verbose: verbose,
		now:    time.Unix(1_700_000_000, 0),
		byName: map[string]*simNode{},
		rings:  rings,
		cut:    map[[2]string]bool{},
		truth:  map[uint64]int{},
		loss:   map[uint64]int{},
	}
	s.dropRate = []float64{0, 0.02, 0.1, 0.3}[rng.IntN(4)]
	s.dupRate = []float64{0, 0.05}[rng.IntN(2)]
	s.kills = rng.IntN(3) > 0
	s.log = []ownership.Epoch{rings.get(nil)}
	var names []string
	for range 3 + rng.IntN(5) {
		names = append(names, s.spawn().name)
	}
	s.appendEpoch(names, nil)
	s.tracef("start: %d nodes, drop rate %.2f, duplicate rate %.2f, kills %v", len(names), s.dropRate, s.dupRate, s.kills)
	return s
}

func (s *sim) tracef(format string, args ...any) {
	line := fmt.Sprintf("%7.3fs ", float64(s.now.UnixNano()%1e11)/1e9) + fmt.Sprintf(format, args...)
	s.trace = append(s.trace, line)
	if s.verbose {
		fmt.Println(line)
	}
}

// spawn starts a new member's process at the latest epoch (before the
// epoch that adds it).
func (s *sim) spawn() *simNode {
	s.nextName++
	name := fmt.Sprintf("n%02d", s.nextName)
	base := s.log[len(s.log)-1]
	m, err := ownership.New(ownership.Config{Self: name, DeadOwnerWait: simDeadWait, QueueLimit: 64}, base)
	if err != nil {
		panic(err)
	}
	n := &simNode{
		name: name, m: m, running: true, applied: len(s.log) - 1, seen: s.now,
		store: map[int]map[uint64]int{}, replica: map[int]map[uint64]int{}, rebase: map[int]bool{},
	}
	s.nodes = append(s.nodes, n)
	s.byName[name] = n
	return n
}

// appendEpoch commits the next epoch: members, and those removed.
func (s *sim) appendEpoch(members []string, removed map[string]ownership.Removal) {
	e := s.rings.get(slices.Sorted(slices.Values(members)))
	e.Number, e.Removed = uint64(len(s.log)), removed
	s.log = append(s.log, e)
	for _, how := range removed {
		if how == ownership.Dead {
			s.deadEpochs++
		}
	}
	s.tracef("epoch %d: members %v removed %v", e.Number, members, removed)
}

func (s *sim) members() []string {
	var names []string
	for _, m := range s.log[len(s.log)-1].Ring.Members() {
		names = append(names, m.Name)
	}
	return names
}

func without(names []string, name string) []string {
	var out []string
	for _, n := range names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

func (s *sim) linkUp(from, to string) bool { return !s.cut[[2]string{from, to}] }

func (s *sim) run() error {
	for range simSteps {
		s.event()
		if err := s.step(); err != nil {
			return err
		}
	}
	s.heal()
	s.settling = true
	s.dropRate = 0
	s.tracef("healed; settling")
	for range simSettleSteps {
		if err := s.step(); err != nil {
			return err
		}
		if s.settled() {
			return s.checkAllKeys()
		}
	}
	return fmt.Errorf("invariant 4 (liveness): not settled %v after healing: %s", simSettleSteps*simStep, s.unsettled())
}

func (s *sim) heal() {
	clear(s.cut)
}

// step advances virtual time by one step: the epoch layer, the network,
// ticks, load, and the invariants.
func (s *sim) step() error {
	s.now = s.now.Add(simStep)
	s.raft()
	if err := s.deliver(); err != nil {
		return err
	}
	for _, n := range s.nodes {
		if n.running && s.rng.IntN(simTickEvery) == 0 {
			n.m.Tick()
			if err := s.drain(n); err != nil {
				return err
			}
		}
	}
	if err := s.load(); err != nil {
		return err
	}
	return s.checkOneDecider()
}

// TestSimIsDeterministic: a seed replays to the same schedule, the same
// counts and the same figures, which is what makes a failing seed worth
// printing.
func TestSimIsDeterministic(t *testing.T) {
	rings := ringCache{}
	for seed := uint64(1); seed <= 5; seed++ {
		a, b := newSim(seed, false, rings), newSim(seed, false, ringCache{})
		errA, errB := a.run(), b.run()
		if fmt.Sprint(errA) != fmt.Sprint(errB) || !slices.Equal(a.trace, b.trace) || !maps.Equal(a.truth, b.truth) ||
			!maps.Equal(a.loss, b.loss) || a.decided != b.decided || a.waits != b.waits {
			t.Fatalf("seed %d ran two ways:\n%s\n--- and ---\n%s", seed, strings.Join(a.trace, "\n"), strings.Join(b.trace, "\n"))
		}
	}
}
