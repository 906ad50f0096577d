package bucket

// A token bucket's debt: a settle that charges more than the bucket holds
// drives it below empty, up to TokenDebtBursts bursts. The part below
// empty is kept apart from the TAT, as a TokenDebt tied to the limit that
// settled it, because the TAT is shared by every limit on the key and
// ClampToken reads a TAT beyond one horizon as another limit's take: kept
// in the TAT, the debt would be clamped away, or would lock callers of a
// smaller limit out beyond their own window. So the TAT never runs more
// than one horizon ahead (ClampToken still clamps nothing this package
// makes), and only the owning limit sees the debt.

// TokenDebt is a token bucket's debt below empty, owned by the limit that
// settled it (its capacity and emission interval: two limits with the
// same pair count identically). The zero TokenDebt is no debt.
type TokenDebt struct {
	// Capacity and Interval (ns) are the owning limit's.
	Capacity, Interval int64
	// Until is the owning limit's TAT with the debt (unix ns): the instant
	// its bucket is full again. The debt is paid (the bucket back at empty)
	// once Until-now is within the owner's horizon, and gone at Until.
	Until int64
}

// DebtID and DebtTag name the record (a Reservation) that carries a key's
// TokenDebt wherever its reservations go (handoff, replication): no
// reservation ID is ever DebtID/DebtTag (the store draws IDs avoiding it).
const (
	DebtID  uint64 = 0xdeb7_deb7_deb7_deb7
	DebtTag uint64 = 0
)

// Owns reports whether d is a debt of l still live at now.
func (d TokenDebt) Owns(l Limit, now int64) bool {
	return d.Until > now && l.Algorithm == TokenBucket && l.Limit > 0 &&
		d.Capacity == l.Capacity() && d.Interval == l.interval()
}

// Units is the debt at now in its owner's units, rounded up: how many
// units of refill it takes before the owner's bucket is back at empty.
func (d TokenDebt) Units(now int64) int64 {
	if d.Interval <= 0 {
		return 0
	}
	below := d.Until - now - d.Capacity*d.Interval
	return max(below+d.Interval-1, 0) / d.Interval
}

// Record is d as the reservation record that carries it: DebtID/DebtTag,
// Estimate the owner's capacity, Window its interval, Expires Until,
// Settled (so nothing settles or counts it as a reservation).
func (d TokenDebt) Record() Reservation {
	return Reservation{ID: DebtID, Tag: DebtTag, Estimate: d.Capacity, Window: d.Interval, Expires: d.Until, Settled: true}
}

// IsDebt reports whether r is a debt record (see Record).
func (r Reservation) IsDebt() bool { return r.ID == DebtID && r.Tag == DebtTag }

// Debt is the TokenDebt r carries (the zero TokenDebt when r is no debt
// record).
func (r Reservation) Debt() TokenDebt {
	if !r.IsDebt() {
		return TokenDebt{}
	}
	return TokenDebt{Capacity: r.Estimate, Interval: r.Window, Until: r.Expires}
}

// withDebt is the owner's view of s: its TAT, or Until when d is l's live
// debt and later, bounded by (1+TokenDebtBursts) horizons from now (a
// clock that stepped back, as ClampToken bounds the TAT).
func withDebt(s TokenState, d TokenDebt, l Limit, now int64) TokenState {
	if !d.Owns(l, now) {
		return s
	}
	until := min(d.Until, now+(1+TokenDebtBursts)*l.Capacity()*l.interval())
	return TokenState{TAT: max(s.TAT, until)}
}

// splitDebt stores the owner's view e back: the TAT at most one horizon
// ahead of now, the rest as l's debt (the zero TokenDebt for none).
func splitDebt(e TokenState, l Limit, now int64) (TokenState, TokenDebt) {
	interval := l.interval()
	h := now + l.Capacity()*interval
	if e.TAT <= h {
		return e, TokenDebt{}
	}
	return TokenState{TAT: h}, TokenDebt{Capacity: l.Capacity(), Interval: interval, Until: e.TAT}
}

// TakeTokenDebt is TakeToken on a state s (already clamped, ClampToken)
// with debt d: under the owning limit the take sees the debt (denied while
// the bucket is below empty, RetryAfter and ResetAfter counting it,
// Remaining 0); under another limit, or once paid, it is TakeToken on s.
// It returns the new state and debt (d unchanged by a read or a deny; the
// zero TokenDebt once an allowed take has folded a paid debt into the TAT).
func TakeTokenDebt(s TokenState, d TokenDebt, l Limit, now, cost int64) (TokenState, TokenDebt, Result, error) {
	if !d.Owns(l, now) {
		next, res, err := TakeToken(s, l, now, cost)
		return next, d, res, err
	}
	e := withDebt(s, d, l, now)
	next, res, err := TakeToken(e, l, now, cost)
	if err != nil || next == e {
		return s, d, res, err
	}
	s, d = splitDebt(next, l, now)
	return s, d, res, nil
}

// SettleTokenDebt is SettleToken on a state s (already clamped) with debt
// d: under d's owner the settle applies to the state with the debt (a
// refund pays the debt first); an excess beyond empty becomes l's debt, up
// to TokenDebtBursts bursts. Another limit's debt stays as it is.
func SettleTokenDebt(s TokenState, d TokenDebt, l Limit, now, estimate, actual int64) (TokenState, TokenDebt, Settlement) {
	owned := d.Owns(l, now)
	next, st := SettleToken(withDebt(s, d, l, now), l, now, estimate, actual)
	ns, nd := splitDebt(next, l, now)
	if !owned && nd == (TokenDebt{}) && d.Until > now {
		nd = d // another limit's debt, untouched
	}
	return ns, nd, st
}

// GiveTokenDebt is GiveToken on a state s (already clamped) with debt d:
// under d's owner the units given back pay the debt first.
func GiveTokenDebt(s TokenState, d TokenDebt, l Limit, now, n int64) (TokenState, TokenDebt, int64, Result, error) {
	if !d.Owns(l, now) {
		next, given, res, err := GiveToken(s, l, now, n)
		return next, d, given, res, err
	}
	e := withDebt(s, d, l, now)
	next, given, res, err := GiveToken(e, l, now, n)
	if err != nil {
		return s, d, 0, res, err
	}
	s, d = splitDebt(next, l, now)
	return s, d, given, res, nil
}
