package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/metadata"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// ResetFull is Reset's remaining for a reset to full.
const ResetFull = -1

// KeyInfo is a key's state on its owner, as Inspect and Reset report it.
type KeyInfo struct {
	Key string
	// Owner is the node that owns the key and answered.
	Owner string
	// Policy is the policy's name, "" for an inline limit.
	Policy    string
	Algorithm Algorithm
	// Limit is the limit's capacity, Remaining what could be spent now.
	Limit, Remaining int64
	// ResetAfter is the time until the key is full again, ResetAt that
	// instant by the owner's clock.
	ResetAfter time.Duration
	ResetAt    time.Time
	// WindowStart is the start of a window algorithm's current window
	// (zero for the others, or for a key with no state).
	WindowStart time.Time
	// Exists says whether the owner holds a state for the key.
	Exists bool
	// Grants and GrantedTokens are a token bucket's grants out.
	Grants        int
	GrantedTokens int64
	// Leases are a concurrency limit's live leases (at most 100 listed),
	// LeaseCount how many there are.
	Leases     []LeaseInfo
	LeaseCount int
	// Reservations counts the key's live unsettled reservations (Reserve),
	// ReservedUnits the sum of their estimates.
	Reservations  int
	ReservedUnits int64
	// DebtUnits is a token bucket's debt below empty under this limit
	// (a settle charged past empty; checks wait for refill to pay it).
	DebtUnits int64
}

// LeaseInfo describes one live lease.
type LeaseInfo struct {
	Cost         int64
	ExpiresAfter time.Duration
	// Bound says whether the lease is bound to a client identity.
	Bound bool
}

// Inspect reads the state of key under policy (or the inline limit) on its
// owner. The call needs an admin identity: a client certificate (Config.TLS)
// whose name the node lists in --admin-names, or Config.AdminToken.
func (c *Client) Inspect(ctx context.Context, key, policy string, limit Limit) (KeyInfo, error) {
	req := &sluicev1.InspectRequest{Key: key}
	if policy != "" {
		req.Spec = &sluicev1.InspectRequest_Policy{Policy: policy}
	} else {
		req.Spec = &sluicev1.InspectRequest_Limit{Limit: toProtoLimit(&limit)}
	}
	ctx, cancel := c.withTimeout(c.adminContext(ctx))
	defer cancel()
	resp, err := c.admin.Inspect(ctx, req)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("client: inspect: %w", err)
	}
	return fromProtoKeyInfo(key, resp.GetKey()), nil
}

// Reset sets key under policy (or the inline limit) to remaining units
// left on its owner, or to full with ResetFull, and returns its state
// after. It needs an admin identity, as Inspect does.
func (c *Client) Reset(ctx context.Context, key, policy string, limit Limit, remaining int64) (KeyInfo, error) {
	req := &sluicev1.ResetRequest{Key: key}
	if policy != "" {
		req.Spec = &sluicev1.ResetRequest_Policy{Policy: policy}
	} else {
		req.Spec = &sluicev1.ResetRequest_Limit{Limit: toProtoLimit(&limit)}
	}
	if remaining != ResetFull {
		req.Remaining = &remaining
	}
	ctx, cancel := c.withTimeout(c.adminContext(ctx))
	defer cancel()
	resp, err := c.admin.Reset(ctx, req)
	if err != nil {
		return KeyInfo{}, fmt.Errorf("client: reset: %w", err)
	}
	return fromProtoKeyInfo(key, resp.GetKey()), nil
}

// adminContext adds Config.AdminToken to ctx's outgoing metadata.
func (c *Client) adminContext(ctx context.Context) context.Context {
	if c.adminToken == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.adminToken)
}

func fromProtoKeyInfo(key string, k *sluicev1.KeyInfo) KeyInfo {
	out := KeyInfo{Key: key, Owner: k.GetOwner(), Policy: k.GetPolicy(), Algorithm: k.GetAlgorithm(),
		Limit: k.GetLimit(), Remaining: k.GetRemaining(), ResetAfter: k.GetResetAfter().AsDuration(),
		Exists: k.GetExists(), Grants: int(k.GetGrants()), GrantedTokens: k.GetGrantedTokens(), LeaseCount: int(k.GetLeaseCount()),
		Reservations: int(k.GetReservationCount()), ReservedUnits: k.GetReservedUnits(), DebtUnits: k.GetDebtUnits()}
	if k.GetResetAt() != nil {
		out.ResetAt = k.GetResetAt().AsTime()
	}
	if k.GetWindowStart() != nil {
		out.WindowStart = k.GetWindowStart().AsTime()
	}
	for _, le := range k.GetLeases() {
		out.Leases = append(out.Leases, LeaseInfo{Cost: le.GetCost(), ExpiresAfter: le.GetExpiresAfter().AsDuration(), Bound: le.GetBound()})
	}
	return out
}
