package ownership_test

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/limiter/ownership"
)

const raftName = "raft" // the epoch layer's end of a link in sim.cut

// raft plays the epoch layer: it renews the leases of the members it
// reaches both ways, removes as Dead those unseen for simDetect (in
// schedules with kills), and delivers the log to the nodes it reaches,
// each at its own pace.
func (s *sim) raft() {
	for _, n := range s.nodes {
		if !n.running || s.declaredDead(n.name) {
			continue
		}
		if s.linkUp(n.name, raftName) && s.linkUp(raftName, n.name) {
			n.seen = s.now
			n.m.SetLease(s.now.Add(simLease), uint64(len(s.log)-1))
		}
	}
	if s.kills {
		members := s.members()
		for _, name := range members {
			if n := s.byName[name]; s.now.Sub(n.seen) > simDetect && len(members) > 1 {
				s.appendEpoch(without(members, name), map[string]ownership.Removal{name: ownership.Dead})
				break
			}
		}
	}
	for _, n := range s.nodes {
		if !n.running || n.applied == len(s.log)-1 || !s.linkUp(raftName, n.name) {
			continue
		}
		if !s.settling && s.rng.IntN(3) == 0 {
			continue
		}
		n.applied++
		if err := n.m.ApplyEpoch(s.log[n.applied], s.now); err != nil {
			panic(err)
		}
		if n.m.Removed() == ownership.Dead {
			s.tracef("%s applied epoch %d, which removed it as Dead: it stops", n.name, n.applied)
			n.running = false
			continue
		}
		s.drain(n)
		// The heirs may have changed: copy the partitions n owns to them.
		for p := range simPartitions {
			if n.m.Settled(p) {
				s.replicate(n, p, n.store[p])
			}
		}
	}
	for _, n := range s.nodes {
		if n.running && n.m.Removed() == ownership.Leave && n.m.Drained() {
			s.tracef("%s has left and handed off everything: it exits", n.name)
			n.running = false
			for _, o := range s.nodes {
				if o.running {
					o.m.Gone(n.name)
					s.drain(o)
				}
			}
		}
	}
}

func (s *sim) declaredDead(name string) bool {
	for _, e := range s.log {
		if e.Removed[name] == ownership.Dead {
			return true
		}
	}
	return false
}

func (s *sim) send(from, to string, msg *ownership.Message, repl *replication) {
	var delay time.Duration
	if s.rng.IntN(2) == 0 {
		delay = simStep * time.Duration(s.rng.IntN(7))
	}
	s.inflight = append(s.inflight, packet{at: s.now.Add(delay), from: from, to: to, msg: msg, repl: repl})
	if s.rng.Float64() < s.dupRate {
		// The network delivers a copy too, up to 40 steps later.
		late := simStep * time.Duration(1+s.rng.IntN(40))
		s.inflight = append(s.inflight, packet{at: s.now.Add(delay + late), from: from, to: to, msg: msg, repl: repl})
	}
}

// deliver hands the packets due to their nodes, dropping those of cut
// links, stopped nodes and the schedule's drop rate.
func (s *sim) deliver() error {
	var due []packet
	kept := s.inflight[:0]
	for _, pk := range s.inflight {
		if pk.at.After(s.now) {
			kept = append(kept, pk)
		} else {
			due = append(due, pk)
		}
	}
	s.inflight = kept
	for _, pk := range due {
		dst := s.byName[pk.to]
		if s.rng.Float64() < s.dropRate || dst == nil || !dst.running || !s.linkUp(pk.from, pk.to) {
			continue
		}
		if pk.repl != nil {
			c := dst.replica[pk.repl.p]
			if c == nil {
				c = map[uint64]int{}
				dst.replica[pk.repl.p] = c
			}
			for k, v := range pk.repl.counts {
				c[k] = max(c[k], v)
			}
			continue
		}
		if err := dst.m.Step(*pk.msg); err != nil {
			return fmt.Errorf("%s: Step: %w", dst.name, err)
		}
		if err := s.drain(dst); err != nil {
			return err
		}
	}
	return nil
}

// drain does what n's machine asks, in Ready's order.
func (s *sim) drain(n *simNode) error {
	for {
		r := n.m.Ready()
		if r.Empty() {
			return nil
		}
		for _, mg := range r.Merges {
			switch {
			case mg.FromReplica:
				n.store[mg.Partition] = n.heirCopy(mg.Partition)
				n.rebase[mg.Partition] = true
				if s.verbose {
					s.tracef("%s takes p%d from its own heir copy %v", n.name, mg.Partition, n.store[mg.Partition])
				}
			case mg.States == nil:
				n.store[mg.Partition] = nil
				n.rebase[mg.Partition] = true
				if s.verbose {
					s.tracef("%s starts p%d empty", n.name, mg.Partition)
				}
			default:
				pl := mg.States.(*payload)
				n.store[mg.Partition] = maps.Clone(pl.counts)
				n.rebase[mg.Partition] = pl.rebase
			}
			if n.m.Settled(mg.Partition) {
				s.replicate(n, mg.Partition, n.store[mg.Partition])
			}
		}
		for _, tr := range r.Transfers {
			msg := tr.Msg
			pl := &payload{counts: maps.Clone(n.store[msg.Partition]), rebase: n.rebase[msg.Partition]}
			if tr.FromReplica {
				pl = &payload{counts: n.heirCopy(msg.Partition), rebase: true}
			}
			msg.States = pl
			s.send(n.name, msg.To, &msg, nil)
		}
		for i := range r.Messages {
			s.send(n.name, r.Messages[i].To, &r.Messages[i], nil)
		}
		for _, p := range r.Releases {
			delete(n.store, p)
			delete(n.rebase, p)
		}
	}
}

// heirCopy is n's copy of partition p as an heir: the larger count of
// each key in its replica copies and in any copy of p its store still
// holds (one it handed off, not acknowledged yet).
func (n *simNode) heirCopy(p int) map[uint64]int {
	c := maps.Clone(n.replica[p])
	if c == nil {
		c = map[uint64]int{}
	}
	for k, v := range n.store[p] {
		c[k] = max(c[k], v)
	}
	return c
}

// replicate copies counts of partition p to its heirs on n's ring.
func (s *sim) replicate(n *simNode, p int, counts map[uint64]int) {
	h := s.log[n.applied].Heirs
	for k := 0; h != nil && k < h.Len(); k++ {
		if m, ok := h.Heir(uint64(p), k); ok && m.Name != n.name {
			s.send(n.name, m.Name, nil, &replication{p: p, counts: maps.Clone(counts)})
		}
	}
}

// load makes checks of random keys, decided where MayDecide says Decide.
func (s *sim) load() error {
	for range 4 {
		k := uint64(s.rng.IntN(simKeys))
		p := int(k % simPartitions)
		var decider *simNode
		for _, n := range s.nodes {
			if !n.running {
				continue
			}
			switch n.m.MayDecide(p, s.now).Action {
			case ownership.Decide:
				decider = n
			case ownership.Wait:
				s.waits++
			case ownership.Fallback:
				if n.m.Removed() == 0 {
					s.fallbacks++
				}
			}
		}
		if decider != nil {
			if err := s.decide(decider, p, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// decide takes one check of key k at n. Invariants 2 and 3: the count n
// holds is the single counter's, less what an heir's copy lacked when n's
// states came from one (measured at the first decision after, once the
// dead owner's lease has expired).
func (s *sim) decide(n *simNode, p int, k uint64) error {
	st := n.store[p]
	if st == nil {
		st = map[uint64]int{}
		n.store[p] = st
	}
	if n.rebase[p] {
		for kk := uint64(p); kk < simKeys; kk += simPartitions {
			lack := s.truth[kk] - st[kk]
			if lack < 0 {
				return fmt.Errorf("invariant 3: %s took key %d from an heir's copy with %d, more than the %d admitted", n.name, kk, st[kk], s.truth[kk])
			}
			if !s.kills && lack > 0 {
				return fmt.Errorf("invariant 2: %s took key %d from an heir's copy in a schedule without deaths", n.name, kk)
			}
			if lack > s.loss[kk] && s.verbose {
				s.tracef("%s decides p%d: key %d lacks %d", n.name, p, kk, lack-s.loss[kk])
			}
			if lack > s.loss[kk] {
				if st[kk] == 0 {
					s.lostEmpty += lack - s.loss[kk]
				} else {
					s.lostPartial += lack - s.loss[kk]
				}
			}
			s.loss[kk] = lack
		}
		n.rebase[p] = false
	}
	if want := s.truth[k] - s.loss[k]; st[k] != want {
		return fmt.Errorf("invariant 2 (exact handoff): %s decides key %d (partition %d, epoch %d) with count %d, the single counter less the heir copies' lack is %d (admitted %d, lacked %d)",
			n.name, k, p, n.m.Epoch(), st[k], want, s.truth[k], s.loss[k])
	}
	s.decided++
	if st[k] < simLimit {
		st[k]++
		s.truth[k]++
		s.replicate(n, p, map[uint64]int{k: st[k]})
	}
	return nil
}

// checkOneDecider is invariant 1: at most one process may decide any
// partition now.
func (s *sim) checkOneDecider() error {
	for p := range simPartitions {
		deciders := 0
		for _, n := range s.nodes {
			if n.running && n.m.MayDecide(p, s.now).Action == ownership.Decide {
				deciders++
			}
		}
		if deciders < 2 {
			continue
		}
		var who []string
		for _, n := range s.nodes {
			if n.running && n.m.MayDecide(p, s.now).Action == ownership.Decide {
				who = append(who, fmt.Sprintf("%s@%d", n.name, n.m.Epoch()))
			}
		}
		return fmt.Errorf("invariant 1: partition %d decided by %v at once", p, who)
	}
	return nil
}

// settled reports invariant 4's goal: every node has the latest epoch, the
// leavers have exited, and every partition's owner decides it.
func (s *sim) settled() bool { return s.unsettled() == "" }

func (s *sim) unsettled() string {
	var why []string
	for _, n := range s.nodes {
		switch {
		case !n.running:
		case n.applied != len(s.log)-1:
			why = append(why, fmt.Sprintf("%s at epoch %d of %d", n.name, n.applied, len(s.log)-1))
		case n.m.Removed() == ownership.Leave:
			why = append(why, fmt.Sprintf("%s has not handed off everything: %v", n.name, n.m.Pending()))
		}
	}
	last := s.log[len(s.log)-1].Ring
	for p := range simPartitions {
		o, _ := last.PartitionOwner(p)
		n := s.byName[o.Name]
		if !n.running {
			why = append(why, fmt.Sprintf("partition %d: owner %s stopped", p, o.Name))
		} else if d := n.m.MayDecide(p, s.now); d.Action != ownership.Decide {
			why = append(why, fmt.Sprintf("partition %d: owner %s answers %d", p, o.Name, d.Action))
		}
		if len(why) > 8 {
			break
		}
	}
	return strings.Join(why, "; ")
}

// checkAllKeys checks invariants 2 and 3 on every key once settled, those
// not decided since they moved included: each owner holds the single
// counter's count, less what heirs' copies lacked.
func (s *sim) checkAllKeys() error {
	last := s.log[len(s.log)-1].Ring
	for k := uint64(0); k < simKeys; k++ {
		p := int(k % simPartitions)
		o, _ := last.PartitionOwner(p)
		n := s.byName[o.Name]
		if n.rebase[p] {
			continue // from an heir's copy, measured at its first decision
		}
		if got, want := n.store[p][k], s.truth[k]-s.loss[k]; got != want {
			return fmt.Errorf("invariant 2 (exact handoff): settled, %s holds key %d with count %d, want %d (admitted %d, lacked %d)",
				n.name, k, got, want, s.truth[k], s.loss[k])
		}
	}
	return nil
}
