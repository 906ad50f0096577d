// Package limiter owns the decision for a check: it validates requests,
// resolves policies, derives each key's identity hash, and applies the limit
// to the state in the node's store. It is the core that the gRPC and HTTP
// transports call; it reads the clock (an injected one in tests) and keeps
// the metrics of decisions, but it opens no sockets.
//
// # Handoff
//
// When the ring changes (an epoch of the ring's Raft log, applied by each
// node in turn), keys move between nodes. The rule the handoff keeps: a
// node never counts a key afresh while another live node it can reach
// holds the key's state. Each mechanism below is shown needed by a case
// of TestHandoffTwoJoinsThenLeave, TestHandoffAnyOrder or the test it
// names.
//
//  1. Pending partitions (pending.go). A partition this node gains is
//     pending until every node that may hold some of its state has said it
//     holds none: every other member of the ring, plus the previous owners
//     that have left it. Before deciding a key of a pending partition, the
//     node fetches it from the previous owner, and if that node had
//     nothing, from all the others that have not said so yet, at once. A
//     ring change keeps the partitions still pending (with the node that
//     had them first).
//  2. Acknowledgements (acks.go). HandOff ends by telling every owner which
//     of its partitions this node holds nothing of. They may arrive before
//     the receiver's ring shows the change, and stop counting when the
//     sender hands the receiver states of that partition or the receiver
//     takes a ring that gives the partition to someone else. A partition
//     every holder has acknowledged is no longer pending.
//  3. Passing on and adopting (passon.go). A node pushed states that its
//     ring does not give it (from a leaving node, whose ring is its own,
//     or a sender behind) passes them on to the owner on its ring before
//     it answers the push; if its ring names the sender itself, it adopts
//     the keys until its ring changes, and acknowledges no partition of an
//     adopted key. States being handed off leave the sender's store while
//     they travel and are recorded as travelling first (transit.go), so a
//     fetch meanwhile gets a copy and one handed back is kept
//     (TestHandoffKeyFetchedWhileInFlight,
//     TestHandoffKeyHandedBackWhileInFlight,
//     TestTravellingStateIsNeverOutOfSight). A key the ring moves while
//     its owner waits for its state goes to its new owner with the check
//     (movedOn, TestKeyMovedWhileFetchedIsDecidedByItsNewOwner).
//  4. Deciding a key the ring gives to another node (fetch.go). A forwarded
//     check whose hop budget is spent is decided where it lands; if the
//     key has no state there, the node fetches it from the other members
//     first. A leaving node (its ring no longer has it) sends such a check
//     on to the owner on its ring instead (leavingForwards,
//     TestLeavingNodeDecidesNothingForOthers).
//
// Leases of concurrency limits follow the same rules (leaseLocal in
// lease.go; TestLeavingNodeTakesNoLeaseOnAKeyItLacks).
//
// What is not covered: a node behind the others' epoch that asks no one
// (the key's partition is not pending for it) decides the keys it owns on
// its ring until it applies the next epoch; and after the pending TTL, or
// when a holder cannot be reached, the keys it held start afresh (with
// replication, from the heirs' copies; see replicate.go).
//
// # Epochs on peer calls
//
// With Config.Epoch (the node's applied epoch of the ring's Raft log),
// every peer call that carries keys carries the sender's epoch, and the
// receiver checks it once per call (epochs.go), before it judges whether
// the sender is a member of its ring: a receiver behind waits up to
// CatchUpWait to apply it (so a joiner takes the calls of the nodes that
// added it, and an owner the push of a joiner its ring lacked:
// TestJoinerCatchesUpBeforeJudgingItsCallers,
// TestHandoffToAnOwnerBehindIsTakenOnceItCaughtUp), then serves, or
// refuses with nothing applied (ErrEpochBehind); a receiver ahead that
// does not own the keys on its ring redirects a first hop (ErrEpochAhead,
// carrying its epoch), and the sender, once it applied that epoch, routes
// the keys again as a second hop (at most one redirect per call). A fetch
// from a node behind, for a key the receiver's ring gives to a third node,
// is redirected too: the asker catches up and decides the key on its new
// ring (TestFetchFromANodeAheadIsRedirected,
// TestViewsThatDisagreeCountOnce). A sender that does not catch up, or a
// refused call, is answered as for an unreachable owner. Epoch 0
// (unknown: an older node, one not routing by epochs yet, or a leaving
// one, which also serves without waiting) is served as before
// (TestEpochReceiverBehindCatchesUpThenServes,
// TestEpochReceiverAheadRedirectsAndTheSenderReroutes,
// TestEpochZeroIsServedAsBefore).
//
// # Grants and fallback after a move
//
// A grant's unspent tokens go back to the bucket when the grant ends
// early (grantreturn.go): the holder returns them to the grant's issuer,
// which checks its ledger and credits the key's current owner, under
// handoffMu so that a credit never races the key's state in a HandOff.
// The issuer answers the holder within a fetch timeout and goes on with a
// slower credit in the background (credits.go), since the new owner may
// not know the issuer yet. A return whose call fails is sent again, up
// to three calls, while the issuer is on the holder's ring (the issuer
// redeems a grant once, so a repeat credits nothing). A return to an
// issuer that has gone (crashed, or left before the return arrived) gets
// one call; if it fails, the tokens lapse. What a node admits in
// fallback is reported to the key's owner once it answers (reconcile.go).
//
// # Replication and the heir
//
// Owners copy the states they change to their keys' heirs (replicate.go),
// who take the keys over with those counts when an owner dies without
// handing off, and who decide the checks of an unreachable owner's keys on
// their copies (acting.go). docs/failure.md has the bounds this gives.
//
// # Owner leases
//
// With Config.OwnerLease set (the node's lease, renewed through a
// majority of the group of the ring's epochs), a node decides a key as
// its owner only while it holds that lease, and a key of a partition
// moved from a member removed as dead only once AwaitDead's wait has
// ended (the node ends it DeadWait after applying the Dead epoch).
// Otherwise its callers' checks get their failure mode (during a dead
// wait, a FailLocal check with replication is decided on the heir's
// copy), and a forwarded one ErrNoLease or ErrDeadWait, which wrap
// ErrStateElsewhere: nothing applied, the sender falls back
// (ownerlease.go; docs/cluster.md "Owner leases", with the clock-drift
// assumption). Cost: one atomic load per check decided as owner.
//
// # Suspect owners
//
// The node tells the limiter which members its membership suspects
// (SetSuspects, suspect.go): checks, grant requests and leases of their
// keys fail at once, as a call that was not sent (ErrSuspect wraps
// ErrPeerUnavailable and ErrNotSent), so they are answered as for an
// unreachable owner (the key's heir, unless it is suspect too, then the
// failure mode) without the caller's deadline being spent on an owner
// that does not answer. Fetches and handoffs still go to a suspect: giving one up would
// lose states. With no member suspect, the cost per forwarded call is one
// atomic load of a nil pointer.
package limiter
