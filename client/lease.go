package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Lease is a held share of a concurrency limit.
type Lease struct {
	Allowed      bool
	ID           string
	Key          string
	Policy       string
	Limit        Limit
	Remaining    int64
	ExpiresAfter time.Duration
	RetryAfter   time.Duration
	Owner        string
}

// Acquire takes a lease of cost units (0 means 1) for ttl (0 means the
// server's default, 1 minute) on a concurrency limit given by policy or
// limit (whose Algorithm may be left zero).
func (c *Client) Acquire(ctx context.Context, key, policy string, limit Limit, cost int64, ttl time.Duration) (Lease, error) {
	if cost == 0 {
		cost = 1
	}
	if policy == "" && limit.Algorithm == sluicev1.Algorithm_ALGORITHM_UNSPECIFIED {
		limit.Algorithm = Concurrency
	}
	it := toProtoItem(key, policy, &limit, cost)
	req := &sluicev1.AcquireRequest{Key: it.Key, Cost: it.Cost}
	switch s := it.Spec.(type) {
	case *sluicev1.CheckItem_Limit:
		req.Spec = &sluicev1.AcquireRequest_Limit{Limit: s.Limit}
	case *sluicev1.CheckItem_Policy:
		req.Spec = &sluicev1.AcquireRequest_Policy{Policy: s.Policy}
	}
	if ttl > 0 {
		req.Ttl = durationpb.New(ttl)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.api.Acquire(ctx, req)
	if err != nil {
		return Lease{}, fmt.Errorf("client: acquire: %w", err)
	}
	return Lease{
		Allowed: resp.GetAllowed(), ID: resp.GetLeaseId(), Key: key, Policy: policy, Limit: limit,
		Remaining: resp.GetRemaining(), ExpiresAfter: resp.GetExpiresAfter().AsDuration(),
		RetryAfter: resp.GetRetryAfter().AsDuration(), Owner: resp.GetOwner(),
	}, nil
}

// Release returns a lease. It reports false when the lease had already
// lapsed or was unknown.
func (c *Client) Release(ctx context.Context, l Lease) (bool, error) {
	req := &sluicev1.ReleaseRequest{Key: l.Key, LeaseId: l.ID}
	if l.Policy != "" {
		req.Spec = &sluicev1.ReleaseRequest_Policy{Policy: l.Policy}
	} else {
		req.Spec = &sluicev1.ReleaseRequest_Limit{Limit: toProtoLimit(&l.Limit)}
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.api.Release(ctx, req)
	if err != nil {
		return false, fmt.Errorf("client: release: %w", err)
	}
	return resp.GetReleased(), nil
}
