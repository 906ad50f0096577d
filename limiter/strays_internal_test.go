package limiter

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/ring"
)

// The notes of refused states are bounded whatever callers send, kept
// while their sender is not in the ring, handed out once it is, and
// dropped when they expire.
func TestStraysBoundedAndTakenOnceTheSenderIsAMember(t *testing.T) {
	newRing := func(names ...string) *ring.Ring {
		t.Helper()
		var ms []ring.Member
		for _, n := range names {
			ms = append(ms, ring.Member{Name: n, GRPCAddr: "mem:" + n})
		}
		r, err := ring.New(ring.DefaultConfig(), ms)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	s := strays{ttl: time.Hour}
	parts := make([]int, maxStrays+10)
	for i := range parts {
		parts[i] = i
	}
	for i := range 3 {
		s.record(fmt.Sprintf("x%d", i), parts)
	}
	if n := len(s.at); n != maxStrays {
		t.Fatalf("%d notes after %d, want the bound %d", n, 3*len(parts), maxStrays)
	}
	if got := s.take(newRing("n0", "n1")); len(got) != 0 || len(s.at) != maxStrays {
		t.Fatalf("senders not in the ring: took %d, kept %d; want 0 and %d", len(got), len(s.at), maxStrays)
	}
	got := s.take(newRing("n0", "x0"))
	if len(got) != maxStrays || got[7].Name != "x0" || len(s.at) != 0 {
		t.Fatalf("x0 in the ring: took %d (partition 7 from %q), kept %d; want %d from x0 and 0", len(got), got[7].Name, len(s.at), maxStrays)
	}
	s.ttl = 0 // every note has expired
	s.record("x1", []int{1, 2})
	if got := s.take(newRing("n0", "x1")); len(got) != 0 || len(s.at) != 0 {
		t.Fatalf("expired notes: took %d, kept %d; want none", len(got), len(s.at))
	}
}
