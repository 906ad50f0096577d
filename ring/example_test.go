package ring_test

import (
	"fmt"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/sluice-rl/sluice/ring"
)

// A node keeps the current ring in an atomic.Pointer, looks owners up on
// every check, and on a membership change builds a new ring, hands off the
// moved partitions and swaps the new ring in.
func Example() {
	var current atomic.Pointer[ring.Ring]
	members := []ring.Member{
		{Name: "sluice-0", GRPCAddr: "10.0.0.1:8081"},
		{Name: "sluice-1", GRPCAddr: "10.0.0.2:8081"},
		{Name: "sluice-2", GRPCAddr: "10.0.0.3:8081"},
	}
	r, err := ring.New(ring.DefaultConfig(), members)
	if err != nil {
		panic(err)
	}
	current.Store(r)

	key := xxhash.Sum64String("own_account:42") // the identity hash, approximately
	owner, _ := current.Load().Owner(key)
	fmt.Println(owner.Name, owner.GRPCAddr)

	// sluice-3 joins.
	next, err := ring.New(ring.DefaultConfig(), append(members, ring.Member{Name: "sluice-3", GRPCAddr: "10.0.0.4:8081"}))
	if err != nil {
		panic(err)
	}
	moved := ring.Moved(current.Load(), next)
	current.Store(next)
	fmt.Printf("%d members; %.0f%% of the partitions moved\n", next.Len(), 100*float64(len(moved))/float64(next.PartitionCount()))
	// Output:
	// sluice-2 10.0.0.3:8081
	// 4 members; 26% of the partitions moved
}
