package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/internal/codec"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// ErrNoAddrs is returned by New when Config.Addrs is empty.
var ErrNoAddrs = errors.New("client: no node addresses")

// Config configures a Client.
type Config struct {
	// Addrs are host:port gRPC addresses of Sluice nodes. Calls are spread
	// over them round-robin; any node answers for any key.
	Addrs []string
	// Timeout bounds each call that has no deadline of its own; 0 means 2s.
	Timeout time.Duration
	// Grants, if set, turns on local token grants for hot keys.
	Grants *GrantOptions
	// DialOptions are added to the defaults (insecure credentials,
	// round-robin balancing).
	DialOptions []grpc.DialOption
}

// serviceConfig spreads calls round-robin over the nodes and retries a call
// that failed with UNAVAILABLE (a node going away) on another node. Sluice
// servers never answer UNAVAILABLE themselves, so a retried check was not
// applied, except in the rare case of a connection lost mid-call.
const serviceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "sluice.v1.RateLimiter"}, {"service": "sluice.v1.Membership"}],
    "retryPolicy": {
      "maxAttempts": 3,
      "initialBackoff": "0.01s",
      "maxBackoff": "0.1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

// Client talks to a Sluice cluster. It is safe for concurrent use.
type Client struct {
	conn    *grpc.ClientConn
	api     sluicev1.RateLimiterClient
	timeout time.Duration
	grants  *grants // nil without Config.Grants
}

// New connects lazily to the nodes in cfg.Addrs.
func New(cfg Config) (*Client, error) {
	if len(cfg.Addrs) == 0 {
		return nil, ErrNoAddrs
	}
	r := manual.NewBuilderWithScheme("sluice")
	addrs := make([]resolver.Address, len(cfg.Addrs))
	for i, a := range cfg.Addrs {
		addrs[i] = resolver.Address{Addr: a}
	}
	r.InitialState(resolver.State{Addresses: addrs})
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(serviceConfig),
		codec.DialOption(),
	}, cfg.DialOptions...)
	conn, err := grpc.NewClient(r.Scheme()+":///sluice", opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	t := cfg.Timeout
	if t <= 0 {
		t = 2 * time.Second
	}
	return &Client{conn: conn, api: sluicev1.NewRateLimiterClient(conn), timeout: t, grants: newGrants(cfg.Grants)}, nil
}

// Close stops background grant refills and closes the connections.
func (c *Client) Close() error {
	if c.grants != nil {
		c.grants.holder.Close()
	}
	return c.conn.Close()
}

// Algorithm selects how a limit counts.
type Algorithm = sluicev1.Algorithm

// The algorithms.
const (
	TokenBucket   = sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	SlidingWindow = sluicev1.Algorithm_ALGORITHM_SLIDING_WINDOW
	FixedWindow   = sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW
	SlidingLog    = sluicev1.Algorithm_ALGORITHM_SLIDING_LOG
	Concurrency   = sluicev1.Algorithm_ALGORITHM_CONCURRENCY
)

// FailureMode says what a node does when a key's owner is unreachable.
type FailureMode = sluicev1.FailureMode

// The failure modes.
const (
	FailLocal = sluicev1.FailureMode_FAILURE_MODE_LOCAL
	FailDeny  = sluicev1.FailureMode_FAILURE_MODE_DENY
	FailAllow = sluicev1.FailureMode_FAILURE_MODE_ALLOW
)

// Limit is an inline limit: Limit units per Period.
type Limit struct {
	// Algorithm; the zero value is the token bucket.
	Algorithm Algorithm
	Limit     int64
	Period    time.Duration
	// Burst is the token bucket's capacity; 0 means Limit.
	Burst       int64
	FailureMode FailureMode
}

// Item is one check: may Key spend Cost units under Policy or Limit?
type Item struct {
	Key string
	// Policy names a configured policy; when empty, Limit applies.
	Policy string
	Limit  Limit
	// Cost is the number of units to spend; 0 means 1. To read usage
	// without spending, use Usage.
	Cost int64
}

// Result is the answer to one Item.
type Result struct {
	Allowed    bool
	Limit      int64
	Remaining  int64
	ResetAfter time.Duration
	RetryAfter time.Duration
	// Source is "owner", "grant" or "fallback".
	Source string
	// Owner names the node that owns the key.
	Owner string
	// Err is set when the item could not be evaluated (e.g. the node's
	// store is full); Allowed is then false.
	Err error
}

// Check asks about a batch of items in one call. It fails as a whole on bad
// input (a gRPC InvalidArgument naming the field) and otherwise returns one
// Result per item, in order.
func (c *Client) Check(ctx context.Context, items ...Item) ([]Result, error) {
	var local []Result // answers from grants, by item; nil if none
	req := &sluicev1.CheckRequest{Items: make([]*sluicev1.CheckItem, 0, len(items))}
	var sent []int
	for i := range items {
		it := &items[i]
		cost := it.Cost
		if cost == 0 {
			cost = 1
		}
		if c.grants != nil && cost > 0 && grantable(it) {
			if r, ok := c.useGrant(ctx, it, cost); ok {
				if local == nil {
					local = make([]Result, len(items))
				}
				local[i] = r
				continue
			}
		}
		req.Items = append(req.Items, toProtoItem(it.Key, it.Policy, &it.Limit, cost))
		sent = append(sent, i)
	}
	if local == nil {
		return c.check(ctx, req)
	}
	if len(req.Items) > 0 {
		res, err := c.check(ctx, req)
		if err != nil {
			return nil, err
		}
		for j, i := range sent {
			local[i] = res[j]
		}
	}
	return local, nil
}

// Usage reads the usage of key under a policy or limit without spending.
func (c *Client) Usage(ctx context.Context, key, policy string, limit Limit) (Result, error) {
	req := &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{toProtoItem(key, policy, &limit, 0)}}
	res, err := c.check(ctx, req)
	if err != nil {
		return Result{}, err
	}
	return res[0], nil
}

func (c *Client) check(ctx context.Context, req *sluicev1.CheckRequest) ([]Result, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.api.Check(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: check: %w", err)
	}
	if len(resp.GetResults()) != len(req.Items) {
		return nil, fmt.Errorf("client: check: %d results for %d items", len(resp.GetResults()), len(req.Items))
	}
	out := make([]Result, len(resp.Results))
	for i, r := range resp.Results {
		out[i] = fromProtoResult(r)
	}
	return out, nil
}

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

func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

func toProtoLimit(l *Limit) *sluicev1.Limit {
	pl := &sluicev1.Limit{Algorithm: l.Algorithm, Limit: l.Limit, Burst: l.Burst, FailureMode: l.FailureMode}
	if l.Period != 0 {
		pl.Period = durationpb.New(l.Period)
	}
	return pl
}

func toProtoItem(key, policy string, l *Limit, cost int64) *sluicev1.CheckItem {
	it := &sluicev1.CheckItem{Key: key, Cost: &cost}
	if policy != "" {
		it.Spec = &sluicev1.CheckItem_Policy{Policy: policy}
	} else {
		it.Spec = &sluicev1.CheckItem_Limit{Limit: toProtoLimit(l)}
	}
	return it
}

func fromProtoResult(r *sluicev1.CheckResult) Result {
	out := Result{
		Allowed:    r.GetAllowed(),
		Limit:      r.GetLimit(),
		Remaining:  r.GetRemaining(),
		ResetAfter: r.GetResetAfter().AsDuration(),
		RetryAfter: r.GetRetryAfter().AsDuration(),
		Owner:      r.GetOwner(),
	}
	switch r.GetSource() {
	case sluicev1.Source_SOURCE_OWNER:
		out.Source = "owner"
	case sluicev1.Source_SOURCE_GRANT:
		out.Source = "grant"
	case sluicev1.Source_SOURCE_FALLBACK:
		out.Source = "fallback"
	}
	if e := r.GetError(); e != nil {
		out.Err = status.Error(codes.Code(e.GetCode()), e.GetMessage())
	}
	return out
}
