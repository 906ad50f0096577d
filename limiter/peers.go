package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// ErrPeerUnavailable marks a failure to reach a key's owner.
var ErrPeerUnavailable = errors.New("limiter: owner unavailable")

// ErrNotSent marks a Peers error after which the items were certainly not
// applied: the request never left this node (an open circuit breaker, a
// connection that is not up, a closed client, a call dropped while
// queued). Any other error may come after the owner applied them (a
// deadline that passed while the owner was slow, a stream broken
// mid-call), so the limiter never sends such items again, to that owner
// or another: it answers them by their failure mode.
var ErrNotSent = errors.New("limiter: not sent")

// ErrStateElsewhere answers a forwarded check that its receiver, the key's
// new owner, could not decide: the key's state may be on a node it cannot
// reach yet (one that has not seen it join refuses it). Nothing was
// applied; the sender answers the check as if the owner were unreachable,
// through the key's heir (acting.go), which still owns it on its ring.
var ErrStateElsewhere = fmt.Errorf("%w: %w: the key's state is on a node that does not answer the new owner yet", ErrPeerUnavailable, ErrNotSent)

// ErrLeaving marks a handoff refused because the receiving node is
// leaving the cluster too: the sender hands the states to the next owner.
var ErrLeaving = errors.New("limiter: node is leaving")

// Forwarded is one check sent to a key's owner: the key's identity hash,
// its resolved limit and the cost. The owner needs nothing else.
type Forwarded struct {
	Hash  uint64
	Limit bucket.Limit
	Cost  int64
	// UpTo makes the item a grant request (token buckets only): the owner
	// spends as many units as the bucket has, up to Cost, and reports them
	// in Answer.Granted.
	UpTo bool
	// Holder is the tag of the lease holder for Acquire and Release (see
	// HolderTag; 0 for none): the owner binds a new lease to it and
	// releases only a lease bound to it. Checks ignore it.
	Holder uint64
	// Return makes the item a grant return: Cost unspent tokens of the
	// grant this node issued under that id go back to the bucket (see
	// grantLedger); 0 for other items.
	Return uint64
	// Credit makes the item a credit: Cost tokens go back to the bucket,
	// never above capacity. The issuer of a grant sends it, after checking
	// a return, to the key's current owner.
	Credit bool
	// Report makes the item a fallback report: Cost units this node
	// admitted in its local share while the owner was unreachable, counted
	// now on the owner (see reconcile.go).
	Report bool
	// Acting makes the item a check for the key's first heir to decide on
	// its replica, the owner being unreachable from the sender (see
	// acting.go).
	Acting bool
	// Inline marks the item's limit as the client's own, not a named
	// policy's: the owner stores the key as store.Evictable (but for a
	// concurrency limit: a live lease is never evicted).
	Inline bool
	// Client is the tag of the client the check is for (HolderTag of its
	// identity; 0 for none): a new key counts against its cap of live keys
	// on the owner.
	Client uint64
}

// Answer is an owner's answer to one Forwarded item.
type Answer struct {
	bucket.Result
	// Err is set when the owner could not evaluate the item (e.g. its
	// store is full).
	Err error
	// Granted is the number of units spent for a grant request (UpTo), or
	// credited for a return or a credit.
	Granted int64
	// GrantID and Issuer name a grant request's grant, for returning its
	// unspent tokens: the issuer recorded it under GrantID (0: not
	// recorded, not returnable).
	GrantID uint64
	Issuer  string
}

// Peers reaches the other nodes of the cluster (transport's peer client
// implements it). All methods are safe for concurrent use, and each call is
// bounded by ctx and by the implementation's own per-call deadline. An error
// returned by a method (rather than in an Answer) means the node was not
// reached or did not answer; it should wrap ErrPeerUnavailable, and also
// ErrNotSent when the request certainly did not reach the node.
type Peers interface {
	// Check applies items on node to and fills out[i] for items[i].
	// Concurrent calls to the same node may be coalesced into one RPC.
	// hops counts earlier forwards of these items.
	Check(ctx context.Context, to ring.Member, hops int, items []Forwarded, out []Answer) error
	// Acquire takes a lease on node to and returns its ID (zero when
	// denied).
	Acquire(ctx context.Context, to ring.Member, hops int, item Forwarded, ttl time.Duration) (Answer, store.LeaseID, error)
	// Release returns the lease leaseID on node to; it reports false
	// when node to holds no such lease of the item's key.
	Release(ctx context.Context, to ring.Member, hops int, item Forwarded, leaseID store.LeaseID) (Answer, bool, error)
	// Reserve makes a reservation of item.Cost units on node to and
	// returns its ID (zero when denied).
	Reserve(ctx context.Context, to ring.Member, hops int, item Forwarded, ttl time.Duration) (Answer, store.LeaseID, error)
	// Settle settles the reservation id on node to with item.Cost as the
	// actual cost.
	Settle(ctx context.Context, to ring.Member, hops int, item Forwarded, id store.LeaseID) (Answer, SettleAnswer, error)
	// Fetch moves the states of keys from node from (their previous owner)
	// to the caller.
	Fetch(ctx context.Context, from ring.Member, hashes []uint64) ([]store.Entry, error)
	// Handoff pushes states to node to, their new owner, and tells it which
	// partitions this node has finished handing off.
	Handoff(ctx context.Context, to ring.Member, entries []store.Entry, donePartitions []int) error
	// Replicate sends copies of states this node owns to node to, an heir
	// of their keys (see replicate.go).
	Replicate(ctx context.Context, to ring.Member, entries []store.Entry) error
	// Admin inspects or resets (op) the key of item on node to, its
	// owner (see admin.go).
	Admin(ctx context.Context, to ring.Member, hops int, item Forwarded, op AdminOp) (KeyInfo, error)
	// CheckAtomic decides items all or nothing on node to, the owner of
	// every item's key (see atomic.go), and fills out[i] for items[i]. An
	// owner that does not own them all answers an error wrapping
	// ErrAtomicElsewhere.
	CheckAtomic(ctx context.Context, to ring.Member, hops int, items []Forwarded, out []Answer) error
}
