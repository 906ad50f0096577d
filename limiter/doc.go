// Package limiter owns the decision for a check: it validates requests,
// resolves policies, derives each key's identity hash, and applies the limit
// to the state in the node's store. It is the core that the gRPC and HTTP
// transports call; it reads the clock (an injected one in tests) and keeps
// the metrics of decisions, but it opens no sockets.
//
// # Handoff
//
// When the ring changes, keys move between nodes, and nodes see the change
// (and hand off) in any order. The rule the handoff keeps: a node never
// counts a key afresh while another live node it can reach holds the key's
// state. Four mechanisms keep it; each is shown needed by a case of
// TestHandoffTwoJoinsThenLeave or TestHandoffAnyOrder.
//
//  1. Pending partitions (pending.go). A partition this node gains is
//     pending until every node that may hold some of its state has said it
//     holds none: every other node of the ring, plus the previous owners
//     that have left it. Any of them may: after two joins the "previous
//     owner" a newcomer computes may be the other newcomer, which holds
//     nothing yet, and a node may have been handed states meant for
//     another. Before deciding a key of a pending partition, the node
//     fetches it from the previous owner, and if that node had nothing,
//     from all the others that have not said so yet, at once. A ring change
//     keeps the partitions still pending (with the node that had them
//     first) instead of starting over from the new ring's differences.
//  2. Acknowledgements (acks.go). HandOff ends by telling every owner which
//     of its partitions this node holds nothing of (done partitions). They
//     count for the pending TTL, may arrive before the receiver's own ring
//     shows the change, and stop counting when the receiver hands the
//     sender states of that partition or takes a ring that gives the
//     partition to someone else. A partition every holder has acknowledged
//     is no longer pending, so fetches stop once handoffs are done.
//  3. Passing on and adopting (passon.go). A node pushed states that its
//     own ring does not give it passes them on, before it answers the push,
//     to the owner on its ring: it may have acknowledged that partition to
//     that owner already. If its ring names the sender itself (a leaver, or
//     a sender on a ring ahead of this one), it adopts the keys and decides
//     them here until its ring changes: the sender has let go of them.
//     HandOff acknowledges no partition of an adopted key, and adopting
//     waits while HandOff sends its acknowledgements, so a sender whose
//     ring gives it the key back fetches it from the adopter. An owner
//     that refuses the states because its ring does not have this node
//     yet (a joiner, whose acknowledgements it took before it knew it) is
//     asked again for up to half the push's time; if it still refuses,
//     the push fails and its sender keeps its copy, which the owner then
//     fetches (TestClusterTwoJoinThenLeave). An owner that refuses states
//     so remembers their partitions (strays.go), forgets the sender's
//     acknowledgements of them, and once its ring has the sender makes
//     them pending again, asked of the sender first, even the partitions
//     it kept (TestHandoffRefusedPushIsAwaitedOnceTheRingHasItsSender).
//     States being handed off leave the sender's store while they travel,
//     so one handed back before the push returns is kept
//     (TestHandoffKeyHandedBackWhileInFlight), and a fetch meanwhile gets
//     a copy (transit.go, TestHandoffKeyFetchedWhileInFlight); they are
//     recorded as travelling before they leave the store, so a fetch never
//     finds them in neither (TestTravellingStateIsNeverOutOfSight). A key
//     that the ring moves while its owner waits for its state goes to its
//     new owner with the check rather than being counted on the old ring
//     (movedOn, TestKeyMovedWhileFetchedIsDecidedByItsNewOwner), and a key
//     handed back after a fetch took it is decided where it is again
//     (TestKeyHandedBackAfterAFetchIsDecidedHere).
//  4. Deciding a key the ring gives to another node (fetch.go). A forwarded
//     check whose hop budget is spent is decided where it lands, even if
//     that node's ring names another owner (the rings disagree); if the key
//     has no state there, the node fetches it from the other members first.
//     A leaving node (its ring no longer has it) decides no such check: it
//     sends it on to the owner on its ring (leavingForwards,
//     TestLeavingNodeDecidesNothingForOthers), since a state it fetched
//     would leave with it.
//
// Leases of concurrency limits follow the same rules (leaseLocal in
// lease.go): sent on by a leaving node, taken under the key's stripe on
// the view in force, and answered ErrStateElsewhere (the caller falls back
// to its local share) where a check would fall back
// (TestLeavingNodeTakesNoLeaseOnAKeyItLacks).
//
// Views that disagree (fetch.go, unseenOwnerError). A node asked for a
// key it holds nothing of names the key's owner on its own ring when that
// is neither the asker nor itself (OwnerHint). An asker whose ring lacks
// that owner, and has not seen it leave, has not seen it join: rather
// than count the key afresh on its stale ring, it sends its callers'
// checks of the key there (TestViewsThatDisagreeCountOnce: three nodes
// start together, one of them has not heard of the third yet).
//
// What is still not covered: a node whose ring is stale and that asks no
// one (the key's partition is not pending for it, or no node it asks has
// seen the change) decides the keys it believes it owns, so while two
// nodes' rings disagree both may count one key; a check forwarded to such
// a node is decided there; and after the pending TTL, or when a holder
// cannot be reached, the keys it held start afresh (with replication, from
// the heirs' copies; see replicate.go).
//
// # Epochs on peer calls
//
// With Config.Epoch (the node's applied epoch of the ring's Raft log),
// every peer call that carries keys carries the sender's epoch, and the
// receiver checks it once per call (epochs.go): a receiver behind waits
// up to CatchUpWait to apply it, then serves, or refuses with nothing
// applied (ErrEpochBehind); a receiver ahead that does not own the keys
// on its ring redirects a first hop (ErrEpochAhead, carrying its epoch),
// and the sender, once it applied that epoch, routes the keys again as a
// second hop (at most one redirect per call). A sender that does not
// catch up, or a refused call, is answered as for an unreachable owner.
// Epoch 0 (unknown: an older node, one not routing by epochs yet, or a
// leaving one, which also serves without waiting) is served as before (TestEpochReceiverBehindCatchesUpThenServes,
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
