// Package rlheader formats the RateLimit headers of an HTTP answer,
// shared by the HTTP API (api) and the client's HTTP middleware
// (client/middleware), so that both answer in one format. It is pure and
// imports nothing of ours.
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
// RateLimit-Policy and RateLimit follow the IETF httpapi ratelimit-headers
// draft (draft-ietf-httpapi-ratelimit-headers, structured fields): the item
// is the policy name, "default" when it has none; q is the quota, the
// limit's units per period (the sustained rate, not the burst), w the period in whole seconds rounded up (at least 1; absent when
// the period is unknown or there is none, as for a concurrency limit), r the
// units remaining and t the seconds until the state is full again, rounded
// up; r counts against the capacity, so it may exceed q when the burst
// does. The draft defines no burst; it allows other parameters on a quota
// policy item, to be ignored by clients that do not know them, and asks
// that service-specific ones carry a vendor prefix: sluice-burst is the
// token bucket's capacity, sent only when it is known and differs from q:
//
//	RateLimit-Policy: "api";q=100;w=60;sluice-burst=200
//
// RateLimit-Limit (the quota, as q), RateLimit-Remaining and
// RateLimit-Reset are the older, widely implemented form. A deny also carries Retry-After:
// retry_after in whole seconds rounded up, so at least 1 when there is
// anything to wait.
package rlheader

import (
	"net/http"
	"strconv"
	"time"
)

// Item is the quota the headers describe and its state after a check.
type Item struct {
	// Name is the policy's name; "" means "default".
	Name    string
	Allowed bool
	// Limit is the quota (units per Period, the sustained rate),
	// Remaining the units left (counted against the capacity).
	Limit, Remaining int64
	// Burst is the capacity when it differs from Limit (a token bucket's
	// burst); 0 when it is the same or unknown.
	Burst int64
	// Period is the limit's window or refill period; 0 omits w.
	Period time.Duration
	// ResetAfter is the time until the state is full again, RetryAfter
	// (on a deny) the time until the same cost could be allowed.
	ResetAfter, RetryAfter time.Duration
}

// MoreRestrictive reports whether a is strictly more restrictive than b:
// a deny over an allow; between denies, the longer RetryAfter (a client
// that waits that long has a chance with every denied item); then the
// fewer Remaining; then the longer ResetAfter.
func MoreRestrictive(a, b *Item) bool {
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

// The headers' canonical keys (as http.Header.Set would write them):
// Set assigns them directly.
const (
	keyPolicy     = "Ratelimit-Policy"
	keyRateLimit  = "Ratelimit"
	keyLimit      = "Ratelimit-Limit"
	keyRemaining  = "Ratelimit-Remaining"
	keyReset      = "Ratelimit-Reset"
	keyRetryAfter = "Retry-After"
)

// Set sets the RateLimit headers of it on h, and Retry-After when it was
// denied. It is on every answer's path: the values are written one after
// another into one string, and each header's []string is a one-element
// slice of one array, so that it costs two allocations, not one per value.
func Set(h http.Header, it *Item) {
	name := it.Name
	if name == "" {
		name = "default"
	}
	remaining := max(it.Remaining, 0)
	reset := CeilSeconds(it.ResetAfter)

	var (
		scratch [192]byte
		ends    [6]int // where each value ends in b
	)
	b := AppendSFString(scratch[:0], name)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, it.Limit, 10)
	if it.Period > 0 {
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, max(CeilSeconds(it.Period), 1), 10)
	}
	if it.Burst > 0 && it.Burst != it.Limit {
		b = append(b, ";sluice-burst="...)
		b = strconv.AppendInt(b, it.Burst, 10)
	}
	ends[0] = len(b)
	b = AppendSFString(b, name)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, remaining, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, reset, 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, it.Limit, 10)
	ends[2] = len(b)
	b = strconv.AppendInt(b, remaining, 10)
	ends[3] = len(b)
	b = strconv.AppendInt(b, reset, 10)
	ends[4] = len(b)
	keys := []string{keyPolicy, keyRateLimit, keyLimit, keyRemaining, keyReset, keyRetryAfter}
	if !it.Allowed {
		b = strconv.AppendInt(b, CeilSeconds(it.RetryAfter), 10)
		ends[5] = len(b)
	} else {
		keys = keys[:5]
	}
	all := string(b)
	vals := make([]string, len(keys))
	start := 0
	for i, k := range keys {
		vals[i] = all[start:ends[i]]
		start = ends[i]
		h[k] = vals[i : i+1 : i+1] // a full slice: an append elsewhere copies
	}
}

// CeilSeconds is d in whole seconds, rounded up; 0 for d <= 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// AppendSFString appends s as a structured-field string (RFC 9651 §3.3.3):
// quoted, with " and \ escaped. Characters a structured string cannot hold
// (controls, non-ASCII) become '?'.
func AppendSFString(b []byte, s string) []byte {
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
