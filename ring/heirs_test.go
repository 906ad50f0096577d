package ring

import (
	"fmt"
	"testing"
)

func members(names ...string) []Member {
	ms := make([]Member, len(names))
	for i, n := range names {
		ms[i] = Member{Name: n, GRPCAddr: n + ":1"}
	}
	return ms
}

// The first heir of every key is its owner once the owner has left, and
// no member is its own heir or listed twice.
func TestHeirsAreTheNextOwners(t *testing.T) {
	cfg := Config{PartitionCount: 1021, ReplicationFactor: 50}
	names := []string{"a", "b", "c", "d", "e"}
	r, err := New(cfg, members(names...))
	if err != nil {
		t.Fatal(err)
	}
	h, err := r.Heirs(2)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range names {
		var rest []string
		for _, n := range names {
			if n != gone {
				rest = append(rest, n)
			}
		}
		after, err := New(cfg, members(rest...))
		if err != nil {
			t.Fatal(err)
		}
		for key := uint64(0); key < uint64(cfg.PartitionCount); key++ {
			owner, _ := r.Owner(key)
			if owner.Name != gone {
				continue
			}
			heir, ok := h.Heir(key, 0)
			next, _ := after.Owner(key)
			if !ok || heir.Name != next.Name {
				t.Fatalf("key %d of %s: heir %q, owner after %s left %q", key, gone, heir.Name, gone, next.Name)
			}
		}
	}
	for key := uint64(0); key < uint64(cfg.PartitionCount); key++ {
		owner, _ := r.Owner(key)
		h0, ok0 := h.Heir(key, 0)
		h1, ok1 := h.Heir(key, 1)
		if !ok0 || !ok1 || h0.Name == owner.Name || h1.Name == owner.Name || h0.Name == h1.Name {
			t.Fatalf("key %d: owner %s, heirs %q %v, %q %v", key, owner.Name, h0.Name, ok0, h1.Name, ok1)
		}
	}
	if _, ok := h.Heir(0, 2); ok {
		t.Error("a third heir of two asked for")
	}
}

func TestHeirsOfSmallRings(t *testing.T) {
	cfg := Config{PartitionCount: 101, ReplicationFactor: 20}
	for _, tc := range []struct {
		members, n, want int
	}{
		{0, 1, 0}, {1, 1, 0}, {2, 1, 1}, {2, 3, 1}, {3, 0, 0}, {3, 2, 2},
	} {
		var names []string
		for i := 0; i < tc.members; i++ {
			names = append(names, fmt.Sprintf("n%d", i))
		}
		r, err := New(cfg, members(names...))
		if err != nil {
			t.Fatal(err)
		}
		h, err := r.Heirs(tc.n)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for k := 0; k < tc.n; k++ {
			if _, ok := h.Heir(7, k); ok {
				got++
			}
		}
		if got != tc.want {
			t.Errorf("%d members, %d heirs asked: %d heirs, want %d", tc.members, tc.n, got, tc.want)
		}
	}
}

// BenchmarkHeirs is the cost of the heirs a ring change computes, on the
// default config (one ring per member left out for n=1).
func BenchmarkHeirs(b *testing.B) {
	for _, n := range []int{3, 5} {
		var names []string
		for i := 0; i < n; i++ {
			names = append(names, fmt.Sprintf("node-%d", i))
		}
		r, err := New(DefaultConfig(), members(names...))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := r.Heirs(1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
