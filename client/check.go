package client

import (
	"context"
	"fmt"
	"time"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// Algorithm selects how a limit counts.
type Algorithm = sluicev1.Algorithm

// The algorithms.
const (
	TokenBucket   = sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	SlidingWindow = sluicev1.Algorithm_ALGORITHM_SLIDING_WINDOW
	FixedWindow   = sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW
	SlidingLog    = sluicev1.Algorithm_ALGORITHM_SLIDING_LOG
	Concurrency   = sluicev1.Algorithm_ALGORITHM_CONCURRENCY
	// FixedWindowHits counts every hit, admitted or not, as
	// envoyproxy/ratelimit does.
	FixedWindowHits = sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW_HITS
)

// FailureMode says what a node does when a key's owner is unreachable.
type FailureMode = sluicev1.FailureMode

// The failure modes.
const (
	FailLocal = sluicev1.FailureMode_FAILURE_MODE_LOCAL
	FailDeny  = sluicev1.FailureMode_FAILURE_MODE_DENY
	FailAllow = sluicev1.FailureMode_FAILURE_MODE_ALLOW
)

// Calendar is a calendar period (see Limit.Calendar).
type Calendar = sluicev1.Calendar

// The calendar periods.
const (
	// Day runs from midnight to midnight in the limit's Timezone (23 or 25
	// hours across a daylight saving change).
	Day = sluicev1.Calendar_CALENDAR_DAY
	// Week is the ISO 8601 week, from Monday midnight.
	Week  = sluicev1.Calendar_CALENDAR_WEEK
	Month = sluicev1.Calendar_CALENDAR_MONTH
	Year  = sluicev1.Calendar_CALENDAR_YEAR
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
	// Calendar, instead of Period, resets the limit at calendar boundaries
	// in Timezone: TokenBucket (a quota of Limit units per period, full at
	// each boundary), FixedWindow and FixedWindowHits. ResetAfter and
	// RetryAfter run to the next boundary.
	Calendar Calendar
	// Timezone is the calendar's IANA zone, e.g. "Europe/Berlin"; "" is UTC.
	Timezone string
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

	// The answer to a grant request (an up_to item): tokens granted, and
	// the grant's id and issuer.
	granted int64
	grantID uint64
	issuer  string
}

// Check asks about a batch of items in one call. It fails as a whole on bad
// input (a gRPC InvalidArgument naming the field) and otherwise returns one
// Result per item, in order.
func (c *Client) Check(ctx context.Context, items ...Item) ([]Result, error) {
	var local []Result // answers from grants, by item; nil if none
	req := &sluicev1.CheckRequest{Items: make([]*sluicev1.CheckItem, 0, len(items))}
	var sent []int
	var bufs []protoItem
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
		if bufs == nil {
			bufs = make([]protoItem, len(items)) // one allocation for the call's items
		}
		req.Items = append(req.Items, bufs[i].set(it.Key, it.Policy, &it.Limit, cost))
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
	if c.routing {
		return c.checkRouted(ctx, req.Items)
	}
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
