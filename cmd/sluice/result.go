package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sluice-rl/sluice/client"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// resultJSON is the --json form of a result. For `sluice usage` (a read),
// allowed says whether a check of cost 1 would be allowed now
// (remaining >= 1), not whether the read itself was.
type resultJSON struct {
	Key        string `json:"key"`
	Allowed    bool   `json:"allowed"`
	Limit      int64  `json:"limit"`
	Remaining  int64  `json:"remaining"`
	ResetAfter string `json:"reset_after"`
	RetryAfter string `json:"retry_after"`
	Source     string `json:"source"`
	Owner      string `json:"owner"`
	Error      string `json:"error,omitempty"`
}

// resetPhrase says what a result's reset_after is the time until, for the
// limit's algorithm: a token bucket refills fully, a fixed window ends, a
// sliding window or log empties, concurrency leases expire (bucket/'s
// ResetAfter, the time until the state is back to full). Under a named
// policy the CLI does not know the algorithm, so the phrase is the general
// one.
func resetPhrase(policy string, alg sluicev1.Algorithm) string {
	if policy != "" {
		return "fully reset in"
	}
	switch alg {
	case sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET:
		return "refills fully in"
	case sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW, sluicev1.Algorithm_ALGORITHM_FIXED_WINDOW_HITS:
		return "window ends in"
	case sluicev1.Algorithm_ALGORITHM_SLIDING_WINDOW, sluicev1.Algorithm_ALGORITHM_SLIDING_LOG:
		return "window empties in"
	case sluicev1.Algorithm_ALGORITHM_CONCURRENCY:
		return "all leases expire in"
	}
	return "fully reset in"
}

// printResult prints a check's (or, with read, a usage read's) result;
// reset is resetPhrase's wording for its reset_after.
func printResult(w io.Writer, asJSON bool, key string, r client.Result, read bool, reset string) error {
	allowed := r.Allowed
	if read {
		// A read is always allowed; what a caller wants to know is
		// whether the next check of cost 1 would be.
		allowed = r.Err == nil && r.Remaining >= 1
	}
	if asJSON {
		j := resultJSON{Key: key, Allowed: allowed, Limit: r.Limit, Remaining: r.Remaining,
			ResetAfter: r.ResetAfter.String(), RetryAfter: r.RetryAfter.String(), Source: r.Source, Owner: r.Owner}
		if r.Err != nil {
			j.Error = r.Err.Error()
		}
		enc := json.NewEncoder(w)
		return enc.Encode(j)
	}
	switch {
	case r.Err != nil:
		fmt.Fprintf(w, "error: %v\n", r.Err)
	case read:
		next := "a check of 1 would be allowed"
		if !allowed {
			next = "a check of 1 would be denied"
		}
		fmt.Fprintf(w, "%s: used %d of %d, remaining %d (%s), %s %s (source %s, owner %s)\n",
			key, r.Limit-r.Remaining, r.Limit, r.Remaining, next, reset, humanDuration(r.ResetAfter), r.Source, r.Owner)
	case r.Allowed:
		fmt.Fprintf(w, "allowed: remaining %d of %d, %s %s (source %s, owner %s)\n",
			r.Remaining, r.Limit, reset, humanDuration(r.ResetAfter), r.Source, r.Owner)
	default:
		fmt.Fprintf(w, "denied: retry after %s, remaining %d of %d (source %s, owner %s)\n",
			humanDuration(r.RetryAfter), r.Remaining, r.Limit, r.Source, r.Owner)
	}
	return nil
}

// humanDuration is d as the CLI prints it to people: rounded to the
// millisecond ("29.966s", "30s", "1m0.5s"). A positive d under half a
// millisecond prints as "1ms", not "0s": a retry-after of "0s" would say
// there is no need to wait. --json keeps the exact durations.
func humanDuration(d time.Duration) string {
	r := d.Round(time.Millisecond)
	if r == 0 && d > 0 {
		r = time.Millisecond
	}
	return r.String()
}
