// Package epoch orders the ring's changes on a Raft log (go.etcd.io/raft/v3),
// so that every node applies the same sequence of epochs, and gives each
// node an owner lease renewed through a majority. Gossip (package cluster)
// stays the source of liveness; this package turns what gossip sees into
// agreed epochs. Only node imports it.
//
// # Epochs
//
// An Epoch is the ring after one change: a member joined, left gracefully,
// or was removed as dead. Each change is one entry of the group's log: a
// Raft conf change whose Context carries the ring change (the record
// format: record.go), so a member's addition to the ring and to Raft (or
// its removal from both) are one step. Every node applies the log from its
// first entry, so every node delivers epochs 1, 2, 3... of its group to
// Config.OnEpoch, in order, the same on every node. An entry that does not
// apply to the state it reaches (a change proposed twice, or proposed by a
// leader whose view was stale) is skipped on every node alike, and makes no
// epoch. Promotions and demotions of voters are conf changes with no ring
// change; they make no epoch.
//
// # Membership
//
// The node feeds gossip's view to SetView: each member's name, address,
// status (alive, suspect, left, dead) and what it advertises (Advert: its
// Raft ID, its group, its last epoch). Only the leader acts on it, and only
// when every entry of its log is applied (one change in flight at a time),
// in this order: a member the view shows dead, misses, or shows with another
// Raft ID (it restarted without state) is removed as Dead; a member that
// left is removed as Leave (a leader that leaves first hands leadership to
// a caught-up voter); a node that is alive, advertises a Raft ID and no
// group, and is not a member, is added as a learner outside the ring (no
// epoch), and joins (its Join epoch, joiners in name order) once its log
// has caught up with the leader's; then voters are promoted
// from caught-up learners, or demoted, to keep them at the largest odd
// number at most min(MaxVoters, members) (an even number tolerates no more
// failures than one fewer). A voter's removal promotes a learner in the
// same change when one is caught up. A proposal lost to a leader change is
// derived again by the next leader from its view.
//
// # Joining and bootstrap
//
// A node with no Raft state is a new Raft peer: a random Raft ID per process
// start, an empty log. With BootstrapExpect 1 (no join list) it founds a
// group of one at once: a new group ID and a log whose first entry is its
// own Join. With a join list it waits for its view: if any member there
// advertises a group it founds nothing and waits for that group's leader to
// add it (as a learner, whose log the leader then fills from the first
// entry, so the newcomer applies every epoch from 1). If none does and the
// view shows at least BootstrapExpect members, the lowest-named of them
// founds the group and the others are added by it. A 2|1 split start with
// BootstrapExpect 3 thus founds nothing until it heals.
//
// Two groups seen at once (views that disagreed at the start) resolve to
// one: a node whose group has fewer members advertising it in its view than
// another group, or as many and a higher group ID, dissolves: it drops its
// Raft state and waits, as a new peer, to be added by the other group.
//
// A node removed while cut off (gossip saw it dead) keeps its Raft state
// and believes itself a member. When gossip shows it alive again,
// advertising the group, the leader adds it back as a learner under the
// same Raft ID (a Join epoch); its log is then caught up from where it
// diverged. Raft messages carry the sender's group (Message.Group), and a
// node in a group drops another group's, so no node's log mixes two.
//
// # Leases
//
// LeaseUntil is the time until which the node may act as an owner. A
// follower or learner renews it on each heartbeat or append from its
// current leader, once it knows that leader committed an entry of its own
// term: receipt time + LeaseDuration. The leader renews it when a quorum of
// voters acknowledged a heartbeat round (a ReadIndex request, started every
// HeartbeatTicks, which Raft answers only once the leader committed in its
// term): the round's send time + LeaseDuration.
//
// A node cut off from the majority thus holds its lease at most
// ElectionTimeout + LeaseDuration past the cut: a follower's last renewal
// is a message its leader sent before the cut and the Transport delivered
// within the election timeout (its contract); a cut-off leader renews only
// from rounds acknowledged before the cut, and steps down by CheckQuorum.
//
// After applying a Dead epoch, a new owner of the dead node's keys waits
// Config.DeadWait, (ElectionTimeout + LeaseDuration) × (1 + MaxClockDrift),
// before deciding them. The removed node renews only from a leader of a
// term that committed an entry, hence one that holds the removal once it
// is committed; such a leader sends no append or heartbeat to a peer that
// a committed entry removes, applied or not (pendingRemovals, lease.go),
// nor a heartbeat to one only the outgoing half of a joint configuration
// still holds (an append carries the removal, and a follower renews from an
// append only once it knows all its leader committed). So
// the last renewal comes from a message sent by the time the removal was
// applied, or by a stale leader that steps down within one more election
// timeout; the randomized simulation checks the bound after every tick.
//
// Clocks: as in other Raft-based systems with leases (etcd, CockroachDB),
// safety assumes bounded clock rate drift, not synchronized clocks: over
// any interval, two nodes' clocks advance by amounts within a factor of
// (1 + MaxClockDrift) of each other. A lease is measured on the holder's
// own clock from a local event, never compared with another node's clock.
// A node whose clock runs fast, or pauses for longer than its lease
// (a stopped VM), breaks this assumption.
//
// # State
//
// State lives in memory (raft.MemoryStorage, never compacted: the log holds
// ring changes only). A node that restarts is a new peer. machine.reset is
// the seam for a data directory: restoring a log and an applied state there
// instead of starting empty.
//
// # Driving
//
// The protocol is the machine, a deterministic state machine: tick, step
// and setView take the current time as input and leave messages and
// epochs as output; it starts no goroutine and reads no clock. Node wraps
// it: Run owns the loop (a ticker, the inbox Step fills, the latest view),
// sends through the Transport and calls OnEpoch. The tests drive machines
// on an in-memory network with fake time.
package epoch
