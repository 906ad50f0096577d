package client

import (
	"context"
	"fmt"

	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// CheckAtomic asks about items all or nothing (CheckRequest.atomic): no
// item is charged unless every item is allowed; when one is denied, every
// result has Allowed false and nothing was spent. It is one unary call to
// a seed (Config.Addrs, round-robin), which forwards the items to their
// owner: every item's key must live on one node, else the call fails with
// FAILED_PRECONDITION and nothing is spent. Grants are not used.
func (c *Client) CheckAtomic(ctx context.Context, items ...Item) ([]Result, error) {
	req := &sluicev1.CheckRequest{Items: make([]*sluicev1.CheckItem, len(items)), Atomic: true}
	for i := range items {
		it := &items[i]
		cost := it.Cost
		if cost == 0 {
			cost = 1
		}
		req.Items[i] = toProtoItem(it.Key, it.Policy, &it.Limit, cost)
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.api.Check(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("client: atomic check: %w", err)
	}
	if len(resp.GetResults()) != len(items) {
		return nil, fmt.Errorf("client: atomic check: %d results for %d items", len(resp.GetResults()), len(items))
	}
	out := make([]Result, len(items))
	for i, r := range resp.GetResults() {
		out[i] = fromProtoResult(r)
	}
	return out, nil
}
