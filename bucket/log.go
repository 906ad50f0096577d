package bucket

import "time"

// LogState is a sliding log: the admissions of the last period.
type LogState struct {
	// Entries are the admissions of the period ending at the newest one,
	// oldest first (At never decreases); those inside the window ending at
	// now count. Admissions at the same instant share one entry.
	Entries []LogEntry
}

// LogEntry is one admission of Cost units at unix-nanosecond time At.
type LogEntry struct {
	At   int64
	Cost int64
}

// ExpiresAt is the instant from which the state equals the zero state.
// It needs the period, which the state does not keep.
func (s LogState) ExpiresAt(period int64) int64 {
	if len(s.Entries) == 0 {
		return 0
	}
	return s.Entries[len(s.Entries)-1].At + period
}

// TakeLog spends cost units from a sliding log. It is exact: at most l.Limit
// units are admitted in any half-open interval (t-Period, t]. An entry at At
// counts until At+Period, excluded. The log holds at most Limit entries, which
// is why a sliding log's limit is capped at MaxSlidingLogLimit (10,000
// entries of 16 bytes); a take costs time linear in the number of entries.
//
// Clamp: now is treated as at least the time of the newest entry, so entries
// stay ordered and a backwards clock step cannot make any of them count
// less. Entries a full period older than the effective now are dropped when a
// new entry is appended (an allowed take of cost > 0); a read or a deny
// returns the log unchanged, even an expired one, so that the newest entry
// keeps anchoring the clamp. The log holds only entries within a period of
// its newest one, so it never sums to more than Limit.
//
// Remaining is Limit minus the units inside (now-Period, now]. ResetAfter is
// the time until the newest entry leaves the window (0 for an empty window).
// When denied, RetryAfter is the exact time until enough of the oldest
// entries leave the window for the cost to fit.
//
// TakeLog may reuse the backing array of s.Entries (it never allocates when
// the array has room for the new entry): the caller must not use s after the
// call.
func TakeLog(s LogState, l Limit, now, cost int64) (LogState, Result, error) {
	limit := l.Limit
	if cost < 0 || cost > limit {
		return s, Result{Limit: limit}, costError(cost, limit)
	}
	period := int64(l.Period)
	entries := s.Entries
	n := len(entries)
	eff := now
	if n > 0 {
		eff = max(eff, entries[n-1].At)
	}
	// Entries [first:] are inside (eff-period, eff]. For an expired log
	// (newest.At+period <= now) that is none of them: it is empty, as the
	// zero state is.
	cutoff := eff - period
	first := 0
	for first < n && entries[first].At <= cutoff {
		first++
	}
	var used int64
	for _, e := range entries[first:] {
		used += e.Cost
	}
	res := Result{Limit: limit}
	switch {
	case cost == 0:
		res.Allowed = true
	case used+cost > limit:
		excess := used + cost - limit
		for _, e := range entries[first:] {
			if excess -= e.Cost; excess <= 0 {
				res.RetryAfter = time.Duration(e.At + period - now)
				break
			}
		}
	default:
		res.Allowed = true
		used += cost
		if first > 0 {
			n = copy(entries, entries[first:])
			entries = entries[:n]
		}
		if n > 0 && entries[n-1].At == eff {
			entries[n-1].Cost += cost
		} else {
			entries = append(entries, LogEntry{At: eff, Cost: cost})
		}
	}
	res.Remaining = max(limit-used, 0)
	if used > 0 {
		res.ResetAfter = time.Duration(entries[len(entries)-1].At + period - now)
	}
	return LogState{Entries: entries}, res, nil
}
