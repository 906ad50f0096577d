package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/status"
)

// ErrNoOwner is Owner's error when the client does not know the key's
// owner: routing is off (Config.DisableRouting), the members are not
// known yet, the key names a policy the cluster does not have, or the
// owner is marked down.
var ErrNoOwner = errors.New("client: owner unknown")

// Owner returns the member that owns the bucket of key under policy (if
// not "") or the inline limit, as the client's routing sees the ring: its
// Name and GRPCAddr. A ring-aware caller of another API of that node
// (for example Envoy's rate limit service, whose descriptor's bucket is
// the key rls.CounterKey under a FixedWindowHits limit of the rule's
// period) reaches the owner directly, with no forwarding hop. It waits
// for the client's first membership answer, within ctx and the client's
// Timeout. The answer is a hint: the ring may change at any time, and a
// node that does not own a key forwards its check.
func (c *Client) Owner(ctx context.Context, key, policy string, limit Limit) (Member, error) {
	if !c.routing {
		return Member{}, fmt.Errorf("%w: routing is disabled", ErrNoOwner)
	}
	if c.table.Load().ring == nil {
		ctx, cancel := c.withTimeout(ctx)
		defer cancel()
		select {
		case <-c.firstRefresh:
		case <-ctx.Done():
			return Member{}, fmt.Errorf("client: owner: %w", status.FromContextError(ctx.Err()).Err())
		}
	}
	t := c.table.Load()
	ns, ok := t.owner(toProtoItem(key, policy, &limit, 1), time.Now().UnixNano())
	if !ok {
		return Member{}, fmt.Errorf("%w: key %q", ErrNoOwner, key)
	}
	return Member{Name: ns.name, GRPCAddr: ns.addr}, nil
}
