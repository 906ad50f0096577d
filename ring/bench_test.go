package ring

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// BenchmarkOwner looks up the owners of varied keys on a 10-member ring with
// the default config.
//
//	go test -run '^$' -bench Owner -benchmem ./ring/
func BenchmarkOwner(b *testing.B) {
	r := mustNew(b, DefaultConfig(), sluices(10))
	rng := rand.New(rand.NewPCG(1, 1))
	keys := make([]uint64, 4096)
	for i := range keys {
		keys[i] = rng.Uint64()
	}
	var sink int
	i := 0
	for b.Loop() {
		m, _ := r.Owner(keys[i&4095])
		sink += len(m.Name)
		i++
	}
	if sink == 0 {
		b.Fatal("no owners")
	}
}

// BenchmarkNew builds the default ring for clusters of several sizes: the
// cost of a membership change.
//
//	go test -run '^$' -bench New -benchmem ./ring/
func BenchmarkNew(b *testing.B) {
	for _, n := range []int{3, 10, 50, 100} {
		b.Run("members="+strconv.Itoa(n), func(b *testing.B) {
			ms := sluices(n)
			for b.Loop() {
				if _, err := New(DefaultConfig(), ms); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
