package api

import (
	"context"
	"errors"

	"github.com/sluice-rl/sluice/limiter"
)

// AtomicChecker decides a batch all or nothing (CheckRequest.atomic, and
// "atomic" in a POST /v1/check body). (*limiter.Limiter) satisfies it; a
// Checker without it refuses atomic checks.
type AtomicChecker interface {
	CheckAtomic(ctx context.Context, reqs []limiter.Request, out []limiter.Result) ([]limiter.Result, error)
}

// errNoAtomic refuses an atomic check of a Checker that cannot.
var errNoAtomic = errors.New("api: this checker does not decide atomic checks")

// checkAtomic decides reqs all or nothing with c, if it can.
func checkAtomic(ctx context.Context, c Checker, reqs []limiter.Request) ([]limiter.Result, error) {
	ac, ok := c.(AtomicChecker)
	if !ok {
		return nil, errNoAtomic
	}
	return ac.CheckAtomic(ctx, reqs, make([]limiter.Result, 0, len(reqs)))
}
