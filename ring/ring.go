package ring

import (
	"fmt"
	"slices"
	"strings"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// Ring maps identity hashes to the members that own them. It is immutable
// after New and safe for concurrent use; a membership change builds a new
// Ring, which the caller swaps in whole (for example with an
// atomic.Pointer[Ring]).
type Ring struct {
	cfg     Config   // with defaults applied, to rebuild without members (Heirs)
	pc      uint64   // partition count, as a divisor
	members []Member // sorted by Name
	// owners[p] is the index in members of partition p's owner; nil when
	// there are no members. Indexes rather than Members keep the table at 4
	// bytes a partition (64 KiB by default, not 512 KiB), which matters on
	// the hot path of every check.
	owners []int32
	counts []int // counts[i] is the number of partitions members[i] owns
}

// hasher is the consistent.Hasher of every Ring: xxhash, the hash the
// identity hashes are made with.
type hasher struct{}

// Sum64 returns the xxhash of b.
func (hasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// New builds the ring of members under cfg (zero fields of cfg mean their
// defaults). The members may come in any order: they are sorted by Name
// first, so every node computes the same ring from the same membership.
// Names must be unique and non-empty (ErrInvalidMember), and there may be no
// more members than partitions (ErrInvalidConfig). An empty list gives a Ring
// with no members, whose Owner and PartitionOwner report ok=false.
func New(cfg Config, members []Member) (*Ring, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	for i, m := range members {
		if m.Name == "" {
			return nil, fmt.Errorf("%w: members[%d].Name must not be empty", ErrInvalidMember, i)
		}
	}
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Name == sorted[i-1].Name {
			return nil, fmt.Errorf("%w: duplicate Name %q", ErrInvalidMember, sorted[i].Name)
		}
	}
	if len(sorted) > cfg.PartitionCount {
		return nil, fmt.Errorf("%w: PartitionCount %d is less than the number of members, %d",
			ErrInvalidConfig, cfg.PartitionCount, len(sorted))
	}
	r := &Ring{cfg: cfg, pc: uint64(cfg.PartitionCount), members: sorted, counts: make([]int, len(sorted))}
	if len(sorted) == 0 {
		return r, nil
	}
	owners, err := place(cfg, sorted)
	if err != nil {
		return nil, err
	}
	r.owners = owners
	for _, i := range owners {
		r.counts[i]++
	}
	return r, nil
}

// place runs buraksezer/consistent over the sorted members and returns the
// index (into sorted) of each partition's owner.
func place(cfg Config, sorted []Member) (owners []int32, err error) {
	// consistent panics when it cannot place a partition. validate and New
	// rule out the cases we know of (fewer partitions than members, one
	// virtual node, Load <= 1); should another turn up it is an error, not a
	// crash of the node.
	defer func() {
		if v := recover(); v != nil {
			owners, err = nil, fmt.Errorf("ring: cannot place %d partitions on %d members: %v",
				cfg.PartitionCount, len(sorted), v)
		}
	}()
	cms := make([]consistent.Member, len(sorted))
	for i, m := range sorted {
		cms[i] = ringMember{key: vnodePrefix(m.Name), idx: i}
	}
	c := consistent.New(cms, consistent.Config{
		Hasher:            hasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
	})
	owners = make([]int32, cfg.PartitionCount)
	for p := range owners {
		m, ok := c.GetPartitionOwner(p).(ringMember)
		if !ok {
			return nil, fmt.Errorf("ring: partition %d has no owner", p)
		}
		owners[p] = int32(m.idx)
	}
	return owners, nil
}

// Owner returns the member that owns the identity hash key, and false if the
// ring has no members. It is a table lookup: no allocation, no locking.
func (r *Ring) Owner(key uint64) (Member, bool) {
	if r.owners == nil {
		return Member{}, false
	}
	return r.members[r.owners[key%r.pc]], true
}

// Partition returns the partition of the identity hash key: key modulo the
// partition count. It depends only on the Config, not on the members.
func (r *Ring) Partition(key uint64) int {
	return int(key % r.pc)
}

// PartitionOwner returns the owner of partition p, and false if the ring has
// no members or p is not in [0, PartitionCount).
func (r *Ring) PartitionOwner(p int) (Member, bool) {
	if r.owners == nil || p < 0 || p >= len(r.owners) {
		return Member{}, false
	}
	return r.members[r.owners[p]], true
}

// PartitionCount returns the number of partitions keys hash into.
func (r *Ring) PartitionCount() int {
	return int(r.pc)
}

// Members returns a copy of the members, sorted by Name.
func (r *Ring) Members() []Member {
	return slices.Clone(r.members)
}

// Member returns the member called name, and false if there is none.
func (r *Ring) Member(name string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(r.members, name, func(m Member, name string) int {
		return strings.Compare(m.Name, name)
	})
	if !ok {
		return Member{}, false
	}
	return r.members[i], true
}

// Shares returns, for each member's Name, the fraction of the partitions it
// owns; the fractions sum to 1 (the map is empty for a ring with no
// members). Identity hashes spread evenly over partitions, so this is also
// the expected fraction of keys each member owns.
func (r *Ring) Shares() map[string]float64 {
	s := make(map[string]float64, len(r.members))
	for i, m := range r.members {
		s[m.Name] = float64(r.counts[i]) / float64(r.pc)
	}
	return s
}

// Len returns the number of members.
func (r *Ring) Len() int {
	return len(r.members)
}

// Moved returns, in increasing order, the partitions whose owner differs
// between from and to: the partitions whose state must be handed off when
// the ring changes from from to to. Owners are compared by Name (a member
// whose GRPCAddr changed still holds its state); a partition that has an
// owner in one ring but not in the other (a ring with no members) counts as
// moved. A nil ring stands for a ring with no members and the other ring's
// partition count; Moved(nil, nil) is nil.
//
// If the rings' partition counts differ, a key's partition is not the same
// in both and every partition of to is returned.
func Moved(from, to *Ring) []int {
	switch {
	case from == nil && to == nil:
		return nil
	case from == nil:
		from = &Ring{pc: to.pc}
	case to == nil:
		to = &Ring{pc: from.pc}
	}
	var moved []int
	if from.pc != to.pc {
		moved = make([]int, to.pc)
		for p := range moved {
			moved[p] = p
		}
		return moved
	}
	for p := 0; p < int(to.pc); p++ {
		a, aok := from.PartitionOwner(p)
		b, bok := to.PartitionOwner(p)
		if aok != bok || a.Name != b.Name {
			moved = append(moved, p)
		}
	}
	return moved
}
