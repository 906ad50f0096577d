package ownership_test

import "github.com/sluice-rl/sluice/limiter/ownership"

// event may make one change of the schedule: a join, a graceful leave, a
// kill -9, a restart (a killed node back as a new member), a symmetric
// partition cutting a node off (the epoch layer included), a one-way cut,
// or healing.
func (s *sim) event() {
	if s.rng.IntN(100) >= 6 {
		return
	}
	members := s.members()
	var running []string
	for _, name := range members {
		if s.byName[name].running {
			running = append(running, name)
		}
	}
	switch s.rng.IntN(8) {
	case 0, 1:
		if len(members) < 7 {
			n := s.spawn()
			s.tracef("join %s", n.name)
			s.appendEpoch(append(members, n.name), nil)
		}
	case 2:
		if len(running) > 2 {
			name := running[s.rng.IntN(len(running))]
			s.tracef("leave %s", name)
			s.appendEpoch(without(members, name), map[string]ownership.Removal{name: ownership.Leave})
		}
	case 3:
		if s.kills && len(running) > 2 {
			name := running[s.rng.IntN(len(running))]
			s.tracef("kill -9 %s", name)
			s.byName[name].running = false
		}
	case 4:
		if len(running) > 0 {
			name := running[s.rng.IntN(len(running))]
			s.tracef("cut %s off (both ways, from everyone and the epoch layer)", name)
			for _, n := range s.nodes {
				if n.name != name {
					s.cut[[2]string{name, n.name}] = true
					s.cut[[2]string{n.name, name}] = true
				}
			}
			s.cut[[2]string{name, raftName}] = true
			s.cut[[2]string{raftName, name}] = true
		}
	case 5:
		ends := append(running, raftName)
		a, b := ends[s.rng.IntN(len(ends))], ends[s.rng.IntN(len(ends))]
		if a != b {
			s.tracef("cut %s -> %s (one way)", a, b)
			s.cut[[2]string{a, b}] = true
		}
	case 6:
		s.tracef("heal")
		s.heal()
	case 7:
		if s.kills && len(members) < 7 {
			for _, n := range s.nodes {
				if !n.running && n.m.Removed() == 0 {
					nn := s.spawn()
					s.tracef("restart %s as the new member %s", n.name, nn.name)
					s.appendEpoch(append(members, nn.name), nil)
					break
				}
			}
		}
	}
}
