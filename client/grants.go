package client

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/sluice-rl/sluice/internal/grant"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// GrantOptions turns on local token grants in the client (opt-in): for a
// hot key, the client asks the key's owner for a batch of tokens, which the
// owner spends at once, and answers checks from them with no network hop
// (Result.Source "grant"). So the cluster never admits more than the
// bucket allows; tokens unspent after TTL lapse, so under-admission is at
// most the tokens this client holds. Close gives the unspent tokens back
// to the cluster, which credits them to the bucket. Grants apply to checks with an inline
// token-bucket limit; checks that name a policy go to the cluster.
type GrantOptions struct {
	// Threshold is the rate of one key's checks in this client (units per
	// second) above which it uses grants; 0 means 10. A grant request rides
	// the owner's check stream like a check, so a grant of two tokens
	// already halves the key's messages.
	Threshold float64
	// TTL is how long granted tokens may be spent; 0 means 1s. Keep it at
	// most the servers' grant TTL.
	TTL time.Duration
	// Refill sizes a grant: what this client spends in Refill; 0 means 100ms.
	Refill time.Duration
	// MaxShare caps one grant as a fraction of the limit's capacity, so
	// one client cannot starve others; 0 means 0.1.
	MaxShare float64
	// MaxKeys bounds the keys tracked; 0 means 65,536.
	MaxKeys int
}

// DefaultGrantThreshold is GrantOptions.Threshold's default: checks of
// one key per second in this client.
const DefaultGrantThreshold = 10

// grants is the client's grant state.
type grants struct {
	holder   *grant.Holder
	maxShare float64
}

func newGrants(o *GrantOptions) *grants {
	if o == nil {
		return nil
	}
	g := &grants{maxShare: o.MaxShare}
	if g.maxShare <= 0 || g.maxShare > 1 {
		g.maxShare = 0.1
	}
	threshold := o.Threshold
	if threshold <= 0 {
		threshold = DefaultGrantThreshold
	}
	g.holder = grant.NewHolder(grant.Config{Threshold: threshold, TTL: o.TTL, Refill: o.Refill, MaxKeys: o.MaxKeys})
	return g
}

// GrantStats returns the client's grant counters; zero without grants.
func (c *Client) GrantStats() grant.Stats {
	if c.grants == nil {
		return grant.Stats{}
	}
	return c.grants.holder.Stats()
}

// grantable reports whether an item may be answered from a grant.
func grantable(it *Item) bool {
	return it.Policy == "" && it.Limit.Limit > 0 && it.Limit.Period > 0 &&
		(it.Limit.Algorithm == sluicev1.Algorithm_ALGORITHM_UNSPECIFIED || it.Limit.Algorithm == TokenBucket)
}

// itemIdentity hashes what identifies an item's bucket in the client.
func itemIdentity(it *Item) uint64 {
	var d xxhash.Digest
	d.Reset()
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(it.Limit.Period))
	binary.LittleEndian.PutUint64(b[8:], uint64(it.Limit.Limit))
	binary.LittleEndian.PutUint64(b[16:], uint64(it.Limit.Burst))
	_, _ = d.Write(b[:])
	_, _ = d.WriteString(it.Key)
	return d.Sum64()
}

// useGrant tries to answer it from a grant.
func (c *Client) useGrant(ctx context.Context, it *Item, cost int64) (Result, bool) {
	capacity := it.Limit.Limit
	if it.Limit.Burst > 0 {
		capacity = it.Limit.Burst
	}
	if cost > capacity {
		return Result{}, false
	}
	most := max(1, int64(float64(capacity)*c.grants.maxShare))
	lim := toProtoLimit(&it.Limit)
	key := it.Key
	limit := it.Limit
	ask := func(ctx context.Context, want int64) (grant.Reply, error) {
		// The request rides the key's owner's check stream, batched with
		// checks (an up_to item), rather than a call of its own.
		item := toProtoItem(key, "", &limit, want)
		item.UpTo = true
		res, err := c.check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{item}})
		if err != nil {
			return grant.Reply{}, err
		}
		resp := res[0]
		if resp.Err != nil {
			return grant.Reply{}, resp.Err
		}
		granted := resp.granted
		if resp.Allowed && granted == 0 {
			// A node that does not know up_to took it as a check of
			// want units, all or nothing: allowed, it spent them all.
			granted = want
		}
		r := grant.Reply{Granted: granted, Remaining: resp.Remaining,
			ResetAfter: resp.ResetAfter, RetryAfter: resp.RetryAfter}
		if id, issuer := resp.grantID, resp.issuer; id != 0 && issuer != "" {
			r.Issuer = issuer
			r.Return = func(ctx context.Context, n int64) error {
				ctx, cancel := c.withTimeout(ctx)
				defer cancel()
				_, err := c.api.Grant(ctx, &sluicev1.GrantRequest{Key: key, Spec: &sluicev1.GrantRequest_Limit{Limit: lim},
					Want: n, ReturnGrant: id, Issuer: issuer})
				return err
			}
		}
		return r, nil
	}
	now := time.Now().UnixNano()
	out, ok := c.grants.holder.Use(ctx, itemIdentity(it), now, cost, capacity, most, false, ask,
		func() int64 { return time.Now().UnixNano() })
	if !ok {
		return Result{}, false
	}
	return Result{Allowed: out.Allowed, Limit: capacity, Remaining: out.Remaining, ResetAfter: out.ResetAfter,
		RetryAfter: out.RetryAfter, Source: "grant"}, true
}
