// Package ring decides which node owns a key: consistent hashing with
// bounded loads (github.com/buraksezer/consistent over xxhash) from limit
// keys' identity hashes to cluster members.
//
// # Model
//
// Every limit key is identified by a 64-bit xxhash, its identity hash
// (computed by package limiter). A key's partition is identity %
// Config.PartitionCount, and each partition has one owner. New places the
// partitions on the members once, by buraksezer/consistent: every member
// gets Config.ReplicationFactor virtual nodes on a 64-bit hash ring, a
// partition goes to the member of the first virtual node at or after the
// partition's hash, and, the load bound, no member takes more than
// ceil(floor(partitions/members) × Config.Load) partitions: a partition whose
// successor is full goes on to the next virtual node with room. New then
// keeps only a table from partition to owner, so Owner is a modulo and two
// slice loads (no allocation, no lock).
//
// A Ring is immutable data, in the style of golang/groupcache: it is built
// from a membership snapshot and never changes. On a membership change the
// caller builds a new Ring, hands off the state of the partitions Moved
// reports, and swaps the new Ring in whole (an atomic.Pointer[Ring]). The
// package imports nothing of Sluice's, never touches the network and starts
// no goroutines.
//
// # Agreement
//
// Nodes route to one another, so every node must compute the same owners
// from the same membership. New sorts the members by Name before building
// (consistent depends on insertion order), hashes only Names (never
// addresses), and all nodes must use the same Config. The library names a
// virtual node by concatenating the member's name and its index, so
// "sluice-1" and "sluice-12" would share keys ("sluice-1"+"23" ==
// "sluice-12"+"3"); members are therefore given to it as "<len>:<name>",
// which is unambiguous.
//
// # Defaults and what they give
//
// The defaults (16381 partitions, 500 virtual nodes, load 1.01) were chosen
// by measurement: go test -v ./ring/ logs the figures of the tests, and
// RING_SWEEP=1 go test -run TestSweep -v ./ring/ compares configs over 90
// random clusters of 2 to 31 members. With the defaults:
//
//   - Balance: 100,000 keys of each of own_account:N,
//     requests_per_sec_account:N and guberload_key-N on 3, 5 and 10 members
//     "sluice-0".. deviate at most 4.4% from the mean per member. Partition
//     shares over random names deviate at most 8.3% (2 to 10 members) and
//     13.6% (11 to 31 members). The spread is below the mean: the load bound
//     keeps every member under about 1.01 × its fair share of partitions
//     (up to ~100 members; the ceiling's rounding adds more beyond). For
//     comparison, 20 virtual nodes and load 1.25 (consistent's defaults)
//     deviate up to 59%, 200 and 1.1 up to 28%.
//   - Movement: a join moves at most 1.34 × the newcomer's fair share
//     (1/members of the partitions; 3 -> 4 members moves 26.3%), a leave the
//     leaver's partitions and a few more. The few more are "stray" moves
//     between members present in both rings, a side effect of the load
//     bound: freeing or filling room changes where overflow lands. We see at
//     most 1.6% of all partitions move that way, whatever the cluster size
//     (the tests allow 2.5%), which in a large cluster is a good part of the
//     fair share.
//   - Cost: Owner takes about 5 ns with no allocation
//     (go test -run '^$' -bench Owner -benchmem ./ring/); the owner table is
//     64 KiB. New takes about 6 ms for 3 members, 11 ms for 10, 90 ms for 50
//     and 340 ms for 100 (go test -run '^$' -bench New ./ring/; consistent
//     re-sorts the virtual nodes after each member it adds), once per
//     membership change. 1000 virtual nodes would narrow the spread for 11
//     to 31 members to 11%, at twice the build time.
package ring
