// Package ownership is the one protocol by which partitions of keys move
// between nodes, keyed by the epochs of an agreed log of ring changes. It
// is a pure state machine per node, in the style of etcd-io/raft: no
// goroutines, no clock, no I/O. Inputs are methods (ApplyEpoch, SetLease,
// Step, Tick, Gone, with now passed in); outputs collect in a Ready that
// the caller drains and carries out in order (merge states, send transfers
// and messages, delete released states). It imports only ring.
//
// # Rules
//
// Each rule names its test. TestSim checks them together, after every step
// of seeded random schedules (see sim_test.go).
//
//  1. A node applies epochs in order, from the epoch before the one that
//     adds it (TestBadInputIsRefusedNamingTheField).
//  2. The owner of p in epoch e stops deciding p as it applies e+1, and
//     sends p's states to p's owner in e+1 in a MsgDone tagged e+1
//     (TestOldOwnerStopsDecidingAsItAppliesTheNextEpoch).
//  3. The new owner decides p only once it has merged that MsgDone
//     (TestNewOwnerDecidesOnlyAfterDone).
//  4. The sender keeps its copy and sends again at each Tick until the
//     MsgAck; a receiver acknowledges a duplicate again and never merges it
//     twice (TestSenderKeepsItsCopyUntilAcknowledged).
//  5. Epochs compose: each node hands p on to its owner in every later
//     epoch that moves p away from it, in epoch order, as soon as it holds
//     p's states (TestChainsForwardOnceSettled, TestReversalsComeBack).
//  6. When the node a MsgDone is awaited from is removed as Dead, the
//     states come from the first heir of p (on the ring it held p in) still
//     a member: the node's own copy, or a MsgFetch answered with the heir's
//     copy. Its owner decides p no earlier than DeadOwnerWait after applying
//     the Dead epoch; that instant travels with the states (NotBefore). With
//     no heir left, p starts empty (TestDeadOwnerIsTakenFromTheHeirAfterTheWait,
//     TestHeirCopyIsFetchedByANewOwnerThatIsNotTheHeir,
//     TestAwaitedHolderRemovedAsDeadIsReplacedByItsHeir).
//  7. Every message carries its sender's epoch. A receiver that is behind
//     asks its caller to catch up (Ready.CatchUp) and queues the message
//     until it applies that epoch, at most QueueLimit of them (more are
//     dropped: every message is sent again until answered). A MsgDone from
//     a member removed as Dead is answered by a MsgRedirect, which makes
//     its sender catch up (TestReceiverBehindQueuesUpToItsLimit,
//     TestDoneFromADeadSenderIsRedirected).
//  8. A node decides as owner only while it holds a lease (now < until)
//     and has applied the lease's epoch, the latest committed when a
//     majority renewed it. Lapsed, MayDecide says Fallback, the limit's
//     failure mode: a node on the minority side decides nothing as owner.
//     Behind the lease's epoch, it says Wait: the node catches up first
//     (TestLeaseCountsOnlyOnceItsEpochIsApplied).
//  9. A leaving node hands off everything and exits once Drained; others
//     then learn it is Gone, which ends their unacknowledged handoffs to
//     it (TestLeaverExitsWhenDrainedAndGoneEndsHandoffsToIt).
//  10. A node removed as Dead decides and sends nothing more: it restarts
//     as a new member (TestNodeRemovedAsDeadStops).
//
// TestSim proves the rules together: seeded schedules of 3 to 7 nodes
// (joins, graceful leaves, kill -9, restarts as new members, symmetric and
// one-way partitions, packets delayed, dropped, reordered and duplicated)
// under load, checking after every step that (1) at most one node may
// decide a partition, (2) every count equals a single counter's, less (3)
// what an heir's copy lacked when one was used, and (4) that every
// partition settles once the network heals. go test runs 300 schedules;
// make sim 10,000; -seed N replays one.
//
// Clocks: DeadOwnerWait must be at least the lease length plus twice the
// largest drift between nodes' clocks (NotBefore is compared on another
// node's clock), as in Raft leader leases.
//
// # What rides on it
//
// Every call between nodes about a key is tagged with its sender's epoch
// and goes to the key's owner in that epoch; the receiver queues it while
// behind, and answers Forward (a redirect to the owner in its later epoch)
// when it no longer owns the key. A grant is a decision (Decide only); its
// unspent tokens go back as a message tagged with the grant's epoch to the
// owner then, redirected as above and applied only when MayDecide says
// Decide (held while Wait), like a fallback report of what a node admitted
// in the failure mode. Concurrency leases are taken as decisions and
// released like grant returns. Owner leases are SetLease. Replication
// sends copies of changed states, tagged with the owner's epoch, to p's
// heirs in that epoch; they are rule 6's heir copies.
package ownership
