package api

import (
	"net/http"
	"strconv"
	"time"

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
// The headers, for a policy "api" of 100 per minute with 99 left, full again
// in 600ms:
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=99;t=1
//	RateLimit-Limit: 100
//	RateLimit-Remaining: 99
//	RateLimit-Reset: 1
//
// and for a token bucket of 100 per minute with a burst of 200, untouched:
//
//	RateLimit-Policy: "api";q=100;w=60;sluice-burst=200
//	RateLimit: "api";r=199;t=1
//	RateLimit-Limit: 100
//
// RateLimit-Policy and RateLimit follow the IETF httpapi ratelimit-headers
// draft (draft-ietf-httpapi-ratelimit-headers, structured fields): the item
// is the policy name, "default" for an inline limit; q is the quota, the
// limit's units per period (the sustained rate, not the burst); w the period
// in whole seconds rounded up (at least 1; absent for a concurrency limit,
// which has no window); r the units remaining, counted against the capacity
// (so up to the burst), and t the seconds until the state is full again,
// rounded up. The draft defines no burst; it allows other parameters on a
// quota policy item, to be ignored by clients that do not know them, and asks
// that service-specific ones carry a vendor prefix: sluice-burst is the
// token bucket's capacity, sent only when it differs from q. RateLimit-Limit
// (the quota, as q), RateLimit-Remaining and RateLimit-Reset are the older,
// widely implemented form. A deny also carries Retry-After: retry_after in
// whole seconds rounded up, so at least 1 when there is anything to wait.

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
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed && a.RetryAfter != b.RetryAfter {
		return a.RetryAfter > b.RetryAfter
	}
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}

// setRateLimitHeaders sets the RateLimit headers (and Retry-After on a
// deny) for the most restrictive of results.
func setRateLimitHeaders(h http.Header, results []limiter.Result) {
	i := mostRestrictive(results)
	if i < 0 {
		return
	}
	r := &results[i]
	name := r.Policy
	if name == "" {
		name = "default"
	}
	remaining := max(r.Remaining, 0)
	reset := ceilSeconds(r.ResetAfter)

	b := make([]byte, 0, 64)
	b = appendSFString(b, name)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, r.Quota, 10)
	if r.Period > 0 {
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, max(ceilSeconds(r.Period), 1), 10)
	}
	if r.Burst != r.Quota {
		b = append(b, ";sluice-burst="...)
		b = strconv.AppendInt(b, r.Burst, 10)
	}
	h.Set("RateLimit-Policy", string(b))

	b = appendSFString(b[:0], name)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, remaining, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, reset, 10)
	h.Set("RateLimit", string(b))

	h.Set("RateLimit-Limit", strconv.FormatInt(r.Quota, 10))
	h.Set("RateLimit-Remaining", strconv.FormatInt(remaining, 10))
	h.Set("RateLimit-Reset", strconv.FormatInt(reset, 10))
	if !r.Allowed {
		h.Set("Retry-After", strconv.FormatInt(ceilSeconds(r.RetryAfter), 10))
	}
}

// ceilSeconds is d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// appendSFString appends s as a structured-field string (RFC 9651 §3.3.3):
// quoted, with " and \ escaped. Characters a structured string cannot hold
// (controls, non-ASCII) become '?'; policy names never contain them.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
