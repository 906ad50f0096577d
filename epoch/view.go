package epoch

// MemberStatus is a member's state in the gossip view.
type MemberStatus uint8

// The states gossip reports.
const (
	// StatusAlive is a member that answers.
	StatusAlive MemberStatus = iota
	// StatusSuspect is a member gossip suspects; nothing changes for it
	// (its lease, if it is cut off, runs out on its own).
	StatusSuspect
	// StatusLeft is a member that left gracefully.
	StatusLeft
	// StatusDead is a member gossip declared dead.
	StatusDead
)

// Peer is one entry of the gossip view the node feeds to SetView: what
// memberlist knows of a node, and what the node advertises in its gossip
// metadata (Node.Advert).
type Peer struct {
	// Name is the node's memberlist name.
	Name string
	// GRPCAddr is where it serves its peers.
	GRPCAddr string
	// RaftID is its Raft ID for this process start; 0 if it advertises
	// none (it is not running this package).
	RaftID uint64
	// Group is the Raft group it belongs to, 0 if none yet.
	Group uint64
	// Epoch is the number of the last epoch it applied.
	Epoch uint64
	// Status is its state in gossip.
	Status MemberStatus
}

// Advert is what a node advertises in its gossip metadata, for the other
// nodes' views.
type Advert struct {
	RaftID uint64
	Group  uint64
	Epoch  uint64
}

func (p Peer) up() bool { return p.Status == StatusAlive || p.Status == StatusSuspect }

// joinOrMerge applies the bootstrap and merge rules (see the package doc)
// to a new view.
func (m *machine) joinOrMerge() {
	if m.group == 0 {
		if li, _ := m.store.LastIndex(); li > 0 || m.rn.BasicStatus().HardState.GetTerm() > 0 {
			return // being added to a group
		}
		count, lowest := 1, m.cfg.Name
		for _, p := range m.view {
			if p.Name == m.cfg.Name || !p.up() {
				continue
			}
			if p.Group != 0 {
				return // a group exists: wait to be added
			}
			count++
			if p.Name < lowest {
				lowest = p.Name
			}
		}
		if count >= m.cfg.BootstrapExpect && lowest == m.cfg.Name {
			_ = m.found() // Bootstrap fails only on a non-empty log, checked above
		}
		return
	}
	sizes := map[uint64]int{m.group: 1}
	for _, p := range m.view {
		if p.Name != m.cfg.Name && p.up() && p.Group != 0 {
			sizes[p.Group]++
		}
	}
	mine := sizes[m.group]
	for g, n := range sizes {
		if g != m.group && (n > mine || n == mine && g < m.group) {
			m.logger.Infof("epoch: group %x (%d) dissolves into %x (%d)", m.group, mine, g, n)
			m.resetDue = true
			return
		}
	}
}
