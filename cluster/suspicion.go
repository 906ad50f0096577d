package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// SuspectAfterProbes is the least number of probes a member must leave
// unanswered, over at least the suspicion window, before this node reports
// it Suspect (see the package documentation, "Suspicion").
const SuspectAfterProbes = 2

// suspicion decides, from this node's probes and the acks they bring,
// which members are suspect: a member is suspect once no ack of it has
// arrived for window (counted from its first probe if it never answered)
// and at least after probes were sent to it meanwhile; it is alive again
// at its next ack, however late. It is safe for concurrent use; its mutex
// is a leaf lock, taken while Cluster.mu is held.
type suspicion struct {
	after  int           // probes sent since the last ack that make a member suspect
	window time.Duration // and the least time since its last ack
	now    func() time.Time

	mu     sync.Mutex
	states map[string]*probeState
}

// probeState is what this node's probes learned of one member.
type probeState struct {
	lastAck time.Time // when its last ack arrived, or when it was first probed
	sent    int       // probes sent since then
	suspect bool
}

// newSuspicion returns a suspicion that needs after probes and window
// without an ack, measured by now.
func newSuspicion(after int, window time.Duration, now func() time.Time) *suspicion {
	return &suspicion{after: after, window: window, now: now, states: make(map[string]*probeState)}
}

// sent records a probe sent to member name.
func (s *suspicion) sent(name string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[name]
	if st == nil {
		st = &probeState{lastAck: now}
		s.states[name] = st
	}
	st.sent++
}

// acked records an ack of member name and reports whether it ended its
// suspicion.
func (s *suspicion) acked(name string) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[name]
	if st == nil {
		return false // not probed (any more): nothing to learn
	}
	st.lastAck, st.sent = now, 0
	if st.suspect {
		st.suspect = false
		return true
	}
	return false
}

// evaluate makes suspect the members silent for window and after probes,
// and reports whether any became so. When every member probed (two or
// more) would be, none is: this node hearing from no one at all is more
// likely its own stall or isolation than everyone's failure, and the
// circuit breakers of the data path cover a node cut off from all.
func (s *suspicion) evaluate() bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var silent []*probeState
	quiet := 0 // members silent, suspect already or not
	for _, st := range s.states {
		if st.sent >= s.after && now.Sub(st.lastAck) >= s.window {
			quiet++
			if !st.suspect {
				silent = append(silent, st)
			}
		}
	}
	if len(silent) == 0 || (len(s.states) >= 2 && quiet == len(s.states)) {
		return false
	}
	for _, st := range silent {
		st.suspect = true
	}
	return true
}

// suspect reports whether member name is suspect.
func (s *suspicion) suspect(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[name]
	return st != nil && st.suspect
}

// keepOnly forgets the members not in names: a member that left the
// table between a round's listing and its probes is not kept for ever.
func (s *suspicion) keepOnly(names map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.states {
		if !names[name] {
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

// probeLoop probes every other member once every probeEvery until done
// is closed or Shutdown is called, and updates the suspicion after each
// round. Run owns it. A round that starts late (this node's goroutines
// were not running for two intervals: a stall, a loaded machine) sends
// its probes but suspects no one: the acks that arrived meanwhile may not
// have been handled yet.
func (c *Cluster) probeLoop(done <-chan struct{}) {
	t := time.NewTicker(c.probeEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-done:
			return
		case <-c.done:
			return
		case now := <-t.C:
			late := now.Sub(last) > 2*c.probeEvery || time.Since(now) > c.probeEvery
			last = now
			if c.left.Load() {
				continue // this node's snapshots no longer matter to routing
			}
			c.probeRound()
			if !late && c.susp.evaluate() {
				c.applySuspicion()
			}
		}
	}
}

// probeRound sends every other member a probe (a memberlist user message,
// over UDP, encrypted as all gossip is): the member answers with an ack
// to this node's gossip address (see handleProbe).
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
	listed := make(map[string]bool, len(targets))
	for _, t := range targets {
		listed[t.name] = true
	}
	c.susp.keepOnly(listed)
	for _, t := range targets {
		c.susp.sent(t.name)
		ping := encodeProbe(probeMsg{kind: probePing, addr: c.gossip, to: t.name, from: c.name})
		if err := c.ml.SendToAddress(memberlist.Address{Addr: t.addr, Name: t.name}, ping); err != nil {
			c.log.Debug("cluster: probe not sent", "member", t.name, "err", err)
		}
	}
}

// handleProbe handles a probe message a member sent: it answers a ping
// with an ack, sent to the address in the ping, and records an ack.
// Called by memberlist's packet handler (NotifyMsg), which it must not
// block.
func (c *Cluster) handleProbe(m probeMsg) {
	switch m.kind {
	case probePing:
		ml := c.mlReady.Load() // a ping may come before Create has returned
		if ml == nil || m.to != c.name || m.from == c.name {
			return // not meant for this node (it took over a gone member's port)
		}
		if err := ml.SendToAddress(memberlist.Address{Addr: m.addr, Name: m.from}, encodeProbe(probeMsg{kind: probeAck, from: c.name})); err != nil {
			c.log.Debug("cluster: probe ack not sent", "member", m.from, "err", err)
		}
	case probeAck:
		if c.susp.acked(m.from) {
			c.applySuspicion()
		}
	}
}

// applySuspicion copies the suspicion into the member table and wakes Run
// if a state changed.
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
	if changed {
		c.dirty = true
	}
	c.mu.Unlock()
	if changed {
		c.signal()
	}
}
