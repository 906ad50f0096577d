package bucket

// ClampToken reads a token state under the caller's limit l: a state whose
// TAT runs further ahead of now than l's horizon (the time l's empty bucket
// takes to refill) was made under another limit sharing the key (a larger
// burst or cost with the same period, a policy changed) or is corrupt. It
// is read as an empty bucket at now (TAT = now + horizon), so a take under
// one limit never locks out a caller with another limit for longer than
// that caller's own window: its retry is at most one emission interval per
// unit and its reset at most its horizon. clamped reports whether s changed.
//
// This reading is also right for a clock that stepped back by d: a state
// made under l at the old clock's t holds TAT <= t + horizon, which on the
// new clock is t - d + horizon + d; the clamp gives now + horizon, never
// earlier than the true state shifted by d, so it admits no more than l.
//
// A settle's debt below empty is kept apart from the TAT (TokenDebt, seen
// only by the limit that settled it), so no TAT this node made is clamped
// and the bound holds for callers of every other limit on the key.
func ClampToken(s TokenState, l Limit, now int64) (next TokenState, clamped bool) {
	h := l.Capacity() * l.interval()
	if s.TAT-now <= h {
		return s, false
	}
	return TokenState{TAT: now + h}, true
}
