package limitertest

import (
	"context"

	"github.com/sluice-rl/sluice/limiter"
)

// stamp marks ctx with the epoch of node p.from (limiter.Limiter.Epoch: 0
// for a limiter without Config.Epoch), as the transport stamps the calls
// it sends, for the target's server-side method.
func (p *peers) stamp(ctx context.Context) context.Context {
	p.n.mu.Lock()
	l := p.n.nodes[p.from]
	p.n.mu.Unlock()
	if l == nil {
		return ctx
	}
	return limiter.WithSenderEpoch(ctx, l.Epoch())
}
