package ring

import (
	"slices"
	"strings"
)

// Heirs lists, for every partition of a ring, the members that would own it
// in turn if its owner left: the first heir owns the partition on the ring
// without its owner, the second on the ring without the owner and the first
// heir, and so on. A node that keeps copies of its keys' states on their
// heirs (replication) has them, after its death, on the node the ring then
// gives them to, when no other member changed. Heirs is immutable and safe
// for concurrent use.
type Heirs struct {
	n     int
	ring  *Ring
	heirs []int32 // heirs[p*n+k] indexes ring.members; -1 for none
}

// Heirs computes up to n heirs of every partition of r (fewer on a ring of
// n members or less: a member is never its own heir). It builds one ring
// per distinct set of members left out, so its cost grows with the
// number of members to the power n: meant for small n (1 or 2) and
// computed once per membership change.
func (r *Ring) Heirs(n int) (*Heirs, error) {
	h := &Heirs{n: n, ring: r}
	if n <= 0 || len(r.members) == 0 {
		h.n = 0
		return h, nil
	}
	h.heirs = make([]int32, int(r.pc)*n)
	for i := range h.heirs {
		h.heirs[i] = -1
	}
	without := map[string]*Ring{} // by the sorted names left out
	ringWithout := func(out []string) (*Ring, error) {
		key := strings.Join(out, "\x00")
		if w, ok := without[key]; ok {
			return w, nil
		}
		keep := make([]Member, 0, len(r.members))
		for _, m := range r.members {
			if !slices.Contains(out, m.Name) {
				keep = append(keep, m)
			}
		}
		w, err := New(r.cfg, keep)
		if err != nil {
			return nil, err
		}
		without[key] = w
		return w, nil
	}
	out := make([]string, 0, n+1)
	for p := 0; p < int(r.pc); p++ {
		out = append(out[:0], r.members[r.owners[p]].Name)
		for k := 0; k < n && len(out) < len(r.members); k++ {
			slices.Sort(out)
			w, err := ringWithout(out)
			if err != nil {
				return nil, err
			}
			m, _ := w.PartitionOwner(p)
			i, _ := slices.BinarySearchFunc(r.members, m.Name, func(a Member, name string) int {
				return strings.Compare(a.Name, name)
			})
			h.heirs[p*n+k] = int32(i)
			out = append(out, m.Name)
		}
	}
	return h, nil
}

// Len returns the most heirs a partition has (n of Ring.Heirs, or 0).
func (h *Heirs) Len() int { return h.n }

// Heir returns the k-th heir (from 0) of the partition of the identity
// hash key, and false if it has none.
func (h *Heirs) Heir(key uint64, k int) (Member, bool) {
	if k < 0 || k >= h.n {
		return Member{}, false
	}
	i := h.heirs[int(key%h.ring.pc)*h.n+k]
	if i < 0 {
		return Member{}, false
	}
	return h.ring.members[i], true
}

// Ring returns the ring the heirs were computed on.
func (h *Heirs) Ring() *Ring { return h.ring }
