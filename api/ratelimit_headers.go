package api

import (
	"net/http"

	"github.com/sluice-rl/sluice/internal/rlheader"
	"github.com/sluice-rl/sluice/limiter"
)

// RateLimit headers.
//
// Every check and usage answer describes one item: the most restrictive
// one. That is the denied item with the longest retry_after (a client that
// waits that long has a chance with every denied item) or, when nothing is
// denied, the item with the least remaining (ties: the longest reset_after,
// then the first). Items that could not be evaluated (Result.Err) are
// skipped; when every item failed, no RateLimit headers are sent.
//
// The format (RateLimit-Policy and RateLimit from the IETF httpapi
// ratelimit-headers draft, the older RateLimit-Limit, -Remaining and
// -Reset, and Retry-After on a deny) is internal/rlheader's, which
// the client's HTTP middleware shares; the item is the policy name,
// "default" for an inline limit. The quota (q, RateLimit-Limit) is the
// limit's units per period, the sustained rate; a token bucket whose burst
// differs from it also carries sluice-burst on RateLimit-Policy. For a
// token bucket of 100 per minute with a burst of 200, untouched:
//
//	RateLimit-Policy: "api";q=100;w=60;sluice-burst=200
//	RateLimit: "api";r=199;t=1
//	RateLimit-Limit: 100

// mostRestrictive returns the index of the item the headers describe, or -1.
func mostRestrictive(results []limiter.Result) int {
	best := -1
	for i := range results {
		r := &results[i]
		if r.Err != nil {
			continue
		}
		if best < 0 || moreRestrictive(r, &results[best]) {
			best = i
		}
	}
	return best
}

// moreRestrictive reports whether a is strictly more restrictive than b.
func moreRestrictive(a, b *limiter.Result) bool {
	ha, hb := headerItem(a), headerItem(b)
	return rlheader.MoreRestrictive(&ha, &hb)
}

// headerItem is what the headers say of r.
func headerItem(r *limiter.Result) rlheader.Item {
	return rlheader.Item{Name: r.Policy, Allowed: r.Allowed, Limit: r.Quota, Burst: r.Burst, Remaining: r.Remaining,
		Period: r.Period, ResetAfter: r.ResetAfter, RetryAfter: r.RetryAfter}
}

// setRateLimitHeaders sets the RateLimit headers (and Retry-After on a
// deny) for the most restrictive of results.
func setRateLimitHeaders(h http.Header, results []limiter.Result) {
	i := mostRestrictive(results)
	if i < 0 {
		return
	}
	it := headerItem(&results[i])
	rlheader.Set(h, &it)
}
