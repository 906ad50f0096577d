package ring

import (
	"math"
	"strconv"
	"testing"
)

// sluices returns members "sluice-0".."sluice-<n-1>" with made-up addresses.
func sluices(n int) []Member {
	return named("sluice-", n)
}

// named returns members prefix+"0".. prefix+"<n-1>".
func named(prefix string, n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{Name: prefix + strconv.Itoa(i), GRPCAddr: "10.0.0." + strconv.Itoa(i) + ":8081"}
	}
	return ms
}

// mustNew builds a ring or fails the test.
func mustNew(t testing.TB, cfg Config, ms []Member) *Ring {
	t.Helper()
	r, err := New(cfg, ms)
	if err != nil {
		t.Fatalf("New(%+v, %d members): %v", cfg, len(ms), err)
	}
	return r
}

// ownerNames returns the owner's Name of every partition ("" for none).
func ownerNames(r *Ring) []string {
	out := make([]string, r.PartitionCount())
	for p := range out {
		m, _ := r.PartitionOwner(p)
		out[p] = m.Name
	}
	return out
}

// shareDeviation returns the largest relative deviation of a member's share
// of partitions from the mean share 1/Len.
func shareDeviation(r *Ring) float64 {
	mean := 1 / float64(r.Len())
	worst := 0.0
	for _, s := range r.Shares() {
		worst = math.Max(worst, math.Abs(s-mean)/mean)
	}
	return worst
}

// moveStats compares two rings: moved is the number of partitions whose
// owner changed, stray the number of those whose change is not explained by
// member joining or leaving (a partition neither taken by a member that is
// only in to nor released by a member that is only in from).
func moveStats(from, to *Ring) (moved, stray int) {
	for _, p := range Moved(from, to) {
		moved++
		a, _ := from.PartitionOwner(p)
		b, _ := to.PartitionOwner(p)
		_, aStays := to.Member(a.Name)
		_, bWasThere := from.Member(b.Name)
		if aStays && bWasThere {
			stray++
		}
	}
	return moved, stray
}
