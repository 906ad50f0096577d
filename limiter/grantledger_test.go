package limiter

import "testing"

// The ledger credits a grant once, for its key, before it expires, at
// most what it granted; when full of live grants it records no more, and
// expired ones make room.
func TestGrantLedgerSteps(t *testing.T) {
	g := grantLedger{max: 2}
	const t0, ttl = int64(1_000), int64(100)
	a := g.record(7, 10, t0, t0+ttl)
	b := g.record(8, 5, t0, t0+ttl)
	if a == 0 || b == 0 || a == b {
		t.Fatalf("ids %d %d, want two distinct non-zero ids", a, b)
	}
	if c := g.record(9, 1, t0+1, t0+1+ttl); c != 0 {
		t.Fatalf("a third live grant in a ledger of 2 was recorded (%d)", c)
	}
	steps := []struct {
		name       string
		id, hash   uint64
		n, at, out int64
	}{
		{"another key", a, 8, 10, t0, 0},
		{"a forged id", a + b, 7, 10, t0, 0},
		{"more than granted", b, 8, 9, t0 + 50, 5},
		{"twice", b, 8, 5, t0 + 50, 0},
		{"expired", a, 7, 10, t0 + ttl, 0},
		{"expired, then again", a, 7, 10, t0, 0},
	}
	for _, st := range steps {
		if got := g.redeem(st.id, st.hash, st.n, st.at); got != st.out {
			t.Fatalf("%s: redeemed %d, want %d", st.name, got, st.out)
		}
	}
	g.record(1, 1, t0, t0+ttl)
	g.record(2, 1, t0, t0+ttl)
	if c := g.record(3, 1, t0+ttl, t0+2*ttl); c == 0 {
		t.Fatal("a full ledger of expired grants recorded nothing")
	}
}
