package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/wire"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// maxAttempts bounds how many nodes a routed check is tried on.
const maxAttempts = 3

// checkRouted sends each item to its owner's stream (any node's when the
// owner is unknown or down) and waits for the answers. Items whose node
// failed are sent to another node, up to maxAttempts nodes in all.
func (c *Client) checkRouted(ctx context.Context, items []*sluicev1.CheckItem) ([]Result, error) {
	if err := validateItems(items); err != nil {
		return nil, err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	if c.table.Load().ring == nil {
		// Before the first answer about the members, wait for it (one
		// call), so that checks start at their owners; if it fails,
		// checks go to the seeds, which forward them.
		select {
		case <-c.firstRefresh:
		case <-ctx.Done():
			return nil, fmt.Errorf("client: check: %w", status.FromContextError(ctx.Err()).Err())
		}
	}
	out := make([]Result, len(items))
	var (
		todo   []int // indexes of items still to answer; nil means all
		failed *nodeStream
		last   error
	)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			c.stats.retries.Add(int64(len(todo)))
		}
		var err error
		todo, failed, last, err = c.sendRouted(ctx, items, todo, out, failed)
		if err != nil {
			return nil, fmt.Errorf("client: check: %w", err)
		}
		if len(todo) == 0 {
			last = nil
			break
		}
	}
	if last != nil {
		return nil, fmt.Errorf("client: check: %w", status.Error(codes.Unavailable, last.Error()))
	}
	for i := range out {
		if out[i].Err != nil && status.Code(out[i].Err) == codes.InvalidArgument {
			return nil, fmt.Errorf("client: check: %w", status.Error(codes.InvalidArgument,
				fmt.Sprintf("items[%d].%s", i, status.Convert(out[i].Err).Message())))
		}
	}
	return out, nil
}

// group is the items of one call bound for one node.
type group struct {
	ns    *nodeStream
	idx   []int
	items []*sluicev1.CheckItem
	res   []Result
}

// sendRouted sends the items of todo (every item if nil) to their nodes,
// avoiding avoid, and waits. It returns the items that failed with
// errRetry, and one node that failed them.
func (c *Client) sendRouted(ctx context.Context, items []*sluicev1.CheckItem, todo []int, out []Result, avoid *nodeStream) (retry []int, failed *nodeStream, why, err error) {
	t := c.table.Load()
	now := time.Now().UnixNano()
	pick := func(it *sluicev1.CheckItem) *nodeStream {
		if ns, ok := t.owner(it, now); ok && ns != avoid {
			return ns
		}
		return c.anyNode(t, avoid, now)
	}
	if todo == nil && len(items) == 1 {
		// The common case: one item, one node, no copying.
		g := group{ns: pick(items[0]), items: items, res: out}
		gs := [1]group{g}
		return c.waitGroups(ctx, gs[:], nil)
	}
	var gs []group
	each := func(i int) {
		ns := pick(items[i])
		for k := range gs {
			if gs[k].ns == ns {
				gs[k].idx = append(gs[k].idx, i)
				gs[k].items = append(gs[k].items, items[i])
				return
			}
		}
		gs = append(gs, group{ns: ns, idx: []int{i}, items: []*sluicev1.CheckItem{items[i]}})
	}
	if todo == nil {
		for i := range items {
			each(i)
		}
	} else {
		for _, i := range todo {
			each(i)
		}
	}
	for k := range gs {
		gs[k].res = make([]Result, len(gs[k].items))
	}
	return c.waitGroups(ctx, gs, out)
}

// waitGroups queues each group's call and waits for all. out, if not nil,
// receives each group's results at their indexes (else the groups' res
// are the caller's). Items of a group that failed with errRetry are
// returned in retry, with the group's node and error.
func (c *Client) waitGroups(ctx context.Context, gs []group, out []Result) (retry []int, failed *nodeStream, why, err error) {
	var one [1]*call
	calls := one[:0]
	if len(gs) > 1 {
		calls = make([]*call, 0, len(gs))
	}
	for k := range gs {
		pc := callPool.Get()
		pc.In, pc.Out = gs[k].items, gs[k].res
		calls = append(calls, pc)
		gs[k].ns.enqueue(pc)
	}
	defer callPool.Put(calls...)
	if werr := wire.Wait(ctx, calls, func(k int, e error) {
		g := &gs[k]
		switch {
		case e == nil:
			if out != nil {
				for j, i := range g.idx {
					out[i] = g.res[j]
				}
			}
		case errors.Is(e, errRetry):
			failed, why = g.ns, e
			if g.idx == nil {
				retry = append(retry, 0)
			} else {
				retry = append(retry, g.idx...)
			}
		default:
			if err == nil {
				err = e
			}
		}
	}); werr != nil {
		return nil, nil, nil, status.FromContextError(werr).Err()
	}
	return retry, failed, why, err
}
