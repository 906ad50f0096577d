package cluster

import (
	"net"
	"sync"
	"time"
)

// SuspectAfterProbes is the number of consecutive direct probes a member
// must fail to answer before this node reports it Suspect (see the package
// documentation, "Suspicion").
const SuspectAfterProbes = 2

// suspicion decides, from the outcomes of this node's own direct probes,
// which members are suspect: a member becomes suspect once it has failed
// SuspectAfterProbes probes in a row and has not answered for at least
// silent (since it was first probed, if it never answered); it is alive
// again at its next answer. It is safe for concurrent use; its mutex is a
// leaf lock, taken while Cluster.mu is held.
type suspicion struct {
	after  int           // consecutive failed probes that make a member suspect
	silent time.Duration // and the least time since its last answer
	now    func() time.Time

	mu     sync.Mutex
	states map[string]*probeState
}

// probeState is what this node's probes learned of one member.
type probeState struct {
	fails   int       // consecutive failed probes since its last answer
	lastAck time.Time // when it last answered, or was first probed
	suspect bool
}

// newSuspicion returns a suspicion that needs after failed probes and
// silent without an answer, measured by now.
func newSuspicion(after int, silent time.Duration, now func() time.Time) *suspicion {
	return &suspicion{after: after, silent: silent, now: now, states: make(map[string]*probeState)}
}

// record records the outcome of a probe of member name and reports
// whether its suspicion changed.
func (s *suspicion) record(name string, answered bool) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[name]
	if st == nil {
		st = &probeState{lastAck: now}
		s.states[name] = st
	}
	if answered {
		st.fails, st.lastAck = 0, now
		if st.suspect {
			st.suspect = false
			return true
		}
		return false
	}
	st.fails++
	if !st.suspect && st.fails >= s.after && now.Sub(st.lastAck) >= s.silent {
		st.suspect = true
		return true
	}
	return false
}

// suspect reports whether member name is suspect.
func (s *suspicion) suspect(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[name]
	return st != nil && st.suspect
}

// keepOnly forgets the members for which keep is false (they left the
// member table): a member that comes back starts afresh.
func (s *suspicion) keepOnly(keep func(name string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.states {
		if !keep(name) {
			delete(s.states, name)
		}
	}
}

// forget drops what the probes learned of member name (it went away): if
// it comes back, it starts afresh.
func (s *suspicion) forget(name string) {
	s.mu.Lock()
	delete(s.states, name)
	s.mu.Unlock()
}

// stateOf returns the State of a live member, Suspect or Alive. Called
// with c.mu held.
func (c *Cluster) stateOf(name string) State {
	if c.susp.suspect(name) {
		return Suspect
	}
	return Alive
}

// probeLoop probes every other member once every probeEvery until ctx is
// done or Shutdown is called. Run owns it.
func (c *Cluster) probeLoop(done <-chan struct{}) {
	t := time.NewTicker(c.probeEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-c.done:
			return
		case <-t.C:
		}
		if c.left.Load() {
			continue // this node's snapshots no longer matter to routing
		}
		c.probeRound()
	}
}

// probeRound pings every other member at once, with memberlist's direct
// UDP ping (which waits memberlist's ProbeTimeout for the ack), records
// the outcomes and updates the member table if a suspicion changed.
func (c *Cluster) probeRound() {
	type target struct{ name, addr string }
	c.mu.Lock()
	targets := make([]target, 0, len(c.members))
	for name, m := range c.members {
		if name != c.name {
			targets = append(targets, target{name, m.GossipAddr})
		}
	}
	c.mu.Unlock()

	answered := make([]bool, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { answered[i] = c.ping(t.name, t.addr) })
	}
	wg.Wait()
	if c.isDone() {
		return // a ping that failed because memberlist stopped says nothing
	}
	for i, t := range targets {
		c.susp.record(t.name, answered[i])
	}
	c.applySuspicion()
}

// ping sends member name at addr a direct probe and reports whether it
// answered in time.
func (c *Cluster) ping(name, addr string) bool {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return false
	}
	_, err = c.ml.Ping(name, ua)
	return err == nil
}

// applySuspicion copies the suspicion into the member table, forgets the
// probes of members that are gone, and wakes Run if a state changed.
func (c *Cluster) applySuspicion() {
	c.mu.Lock()
	changed := false
	for name, m := range c.members {
		if st := c.stateOf(name); st != m.State {
			m.State = st
			c.members[name] = m
			changed = true
			c.log.Info("cluster: member "+st.String(), "member", name)
		}
	}
	c.susp.keepOnly(func(name string) bool { _, ok := c.members[name]; return ok })
	if changed {
		c.dirty = true
	}
	c.mu.Unlock()
	if changed {
		c.signal()
	}
}
