package bucket

import (
	"cmp"
	"math/big"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// maxNow bounds generated times: 2100-01-01, the documented range.
const maxNow = 4_102_444_800 * int64(time.Second)

// drawLimit draws a valid limit for alg: usually a small one, so that denies
// are frequent, and sometimes one anywhere in the valid range, to exercise
// overflow.
func drawLimit(t *rapid.T, alg Algorithm) (l Limit, huge bool) {
	l.Algorithm = alg
	huge = rapid.IntRange(0, 4).Draw(t, "huge") == 0
	maxLimit := int64(MaxLimit)
	if alg == SlidingLog {
		maxLimit = MaxSlidingLogLimit
	}
	if huge {
		l.Limit = rapid.Int64Range(1, maxLimit).Draw(t, "limit")
		l.Period = time.Duration(rapid.Int64Range(1, int64(MaxPeriod)).Draw(t, "period"))
		if alg == TokenBucket && rapid.Bool().Draw(t, "hasBurst") {
			l.Burst = rapid.Int64Range(1, MaxLimit).Draw(t, "burst")
		}
	} else {
		l.Limit = rapid.Int64Range(1, 12).Draw(t, "limit")
		l.Period = time.Duration(rapid.Int64Range(1, 1000).Draw(t, "period"))
		if alg == TokenBucket && rapid.Bool().Draw(t, "hasBurst") {
			l.Burst = rapid.Int64Range(1, 20).Draw(t, "burst")
		}
	}
	if l.Validate() != nil {
		l.Burst = 0 // Burst×interval too long; Limit×interval always fits
	}
	if err := l.Validate(); err != nil {
		t.Fatalf("drew an invalid limit %+v: %v", l, err)
	}
	return l, huge
}

// drawStart draws the first instant of a run.
func drawStart(t *rapid.T, huge bool) int64 {
	if huge {
		return rapid.Int64Range(0, maxNow).Draw(t, "start")
	}
	return rapid.Int64Range(0, 1e15).Draw(t, "start")
}

// drawStep advances now by a generated delta: mostly forward by a fraction
// of the period or a few periods, sometimes not at all, sometimes far, and
// sometimes backwards. Times stay in [0, maxNow].
func drawStep(t *rapid.T, now, period int64) (next int64, backwards bool) {
	var dt int64
	switch k := rapid.IntRange(0, 9).Draw(t, "kind"); {
	case k <= 3:
		dt = rapid.Int64Range(0, max(period/4, 1)).Draw(t, "dt")
	case k <= 5:
		dt = 0
	case k <= 7:
		dt = rapid.Int64Range(0, 3*period).Draw(t, "dt")
	case k == 8:
		dt = -rapid.Int64Range(1, 2*period).Draw(t, "back")
	default:
		dt = rapid.Int64Range(0, 20*period).Draw(t, "jump")
	}
	next = min(max(now+dt, 0), maxNow)
	return next, next < now
}

// drawCost draws a cost in [0, capacity], often 0, 1 or the capacity.
func drawCost(t *rapid.T, capacity int64) int64 {
	switch rapid.IntRange(0, 5).Draw(t, "costKind") {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return capacity
	default:
		return rapid.Int64Range(0, capacity).Draw(t, "cost")
	}
}

// algo describes one take-style algorithm to the generic property driver.
type algo[S any] struct {
	take    takeFunc[S]
	clone   func(S) S
	equal   func(a, b S) bool
	expires func(S, Limit) int64
	// denyKeepsState: a deny returns exactly the input (else it may return
	// an equivalent, normalised state).
	denyKeepsState bool
}

// runOps drives a generated sequence of takes through a, checking the
// properties every algorithm shares, and calls observe with each input state
// (a copy), time, cost and result, for the algorithm's own model.
func runOps[S any](t *rapid.T, a algo[S], l Limit, period int64, huge bool, observe func(in S, now, cost int64, res Result)) {
	capacity := l.Capacity()
	var s S
	now := drawStart(t, huge)
	n := rapid.IntRange(1, 120).Draw(t, "ops")
	for range n {
		now, _ = drawStep(t, now, period)
		cost := drawCost(t, capacity)
		in := a.clone(s)
		next, res, err := a.take(s, l, now, cost)
		if err != nil {
			t.Fatalf("now %d cost %d: unexpected error %v", now, cost, err)
		}
		// Result sanity.
		switch {
		case res.Limit != capacity:
			t.Fatalf("Limit = %d, want %d", res.Limit, capacity)
		case res.Remaining < 0 || res.Remaining > capacity:
			t.Fatalf("Remaining = %d out of [0, %d]", res.Remaining, capacity)
		case res.ResetAfter < 0:
			t.Fatalf("ResetAfter = %v < 0", res.ResetAfter)
		case res.Allowed && res.RetryAfter != 0:
			t.Fatalf("allowed with RetryAfter = %v", res.RetryAfter)
		case !res.Allowed && res.RetryAfter <= 0:
			t.Fatalf("denied with RetryAfter = %v", res.RetryAfter)
		case cost == 0 && !res.Allowed:
			t.Fatalf("read denied: %+v", res)
		case !res.Allowed && cost <= res.Remaining:
			t.Fatalf("denied cost %d with Remaining %d", cost, res.Remaining)
		case res.Allowed && cost > 0 && res.ResetAfter == 0:
			t.Fatalf("allowed cost %d but ResetAfter = 0", cost)
		}
		observe(a.clone(in), now, cost, res)
		if !res.Allowed || cost == 0 {
			// Nothing consumed: exactly the input, or (a read, or an
			// algorithm that normalises) a state that behaves like it
			// from now on.
			if !res.Allowed && a.denyKeepsState && !a.equal(next, in) {
				t.Fatalf("deny changed the state: %+v -> %+v", in, next)
			}
			for range 2 {
				at := now + rapid.Int64Range(0, 3*period).Draw(t, "probeDt")
				c := drawCost(t, capacity)
				s1, r1, _ := a.take(a.clone(in), l, at, c)
				s2, r2, _ := a.take(a.clone(next), l, at, c)
				if r1 != r2 || !a.equivalent(s1, s2, l, at) {
					t.Fatalf("not consumed, yet at now+%d cost %d the input gives %+v %+v and the output %+v %+v",
						at-now, c, r1, s1, r2, s2)
				}
			}
		}
		if !res.Allowed {
			// RetryAfter is exact.
			r := int64(res.RetryAfter)
			if _, res2, _ := a.take(a.clone(next), l, now+r, cost); !res2.Allowed {
				t.Fatalf("denied at now+RetryAfter (%v): %+v", res.RetryAfter, res2)
			}
			if _, res2, _ := a.take(a.clone(next), l, now+r-1, cost); res2.Allowed {
				t.Fatalf("allowed at now+RetryAfter-1ns (%v): %+v", res.RetryAfter, res2)
			}
		}
		s = next
		if rapid.IntRange(0, 9).Draw(t, "checkExpiry") == 0 {
			// An expired state is the zero state.
			at := max(a.expires(s, l), now) + rapid.Int64Range(0, 2*period).Draw(t, "afterExpiry")
			var zero S
			c := drawCost(t, capacity)
			s1, r1, err1 := a.take(a.clone(s), l, at, c)
			s2, r2, err2 := a.take(zero, l, at, c)
			if r1 != r2 || err1 != err2 || !a.equivalent(s1, s2, l, at) {
				t.Fatalf("at expiry+%d cost %d: expired %+v gives %+v %+v, zero gives %+v %+v",
					at-a.expires(s, l), c, s, r1, s1, r2, s2)
			}
		}
	}
}

var (
	tokenAlgo = algo[TokenState]{
		take:           TakeToken,
		clone:          func(s TokenState) TokenState { return s },
		equal:          func(a, b TokenState) bool { return a == b },
		expires:        func(s TokenState, _ Limit) int64 { return s.ExpiresAt() },
		denyKeepsState: true,
	}
	fixedAlgo = algo[WindowState]{
		take:           TakeFixedWindow,
		clone:          func(s WindowState) WindowState { return s },
		equal:          func(a, b WindowState) bool { return a == b },
		expires:        func(s WindowState, _ Limit) int64 { return s.ExpiresAt() },
		denyKeepsState: true,
	}
	slidingAlgo = algo[WindowState]{
		take:    TakeSlidingWindow,
		clone:   func(s WindowState) WindowState { return s },
		equal:   func(a, b WindowState) bool { return a == b },
		expires: func(s WindowState, _ Limit) int64 { return s.ExpiresAt() },
	}
	logAlgo = algo[LogState]{
		take:           TakeLog,
		clone:          func(s LogState) LogState { return LogState{Entries: slices.Clone(s.Entries)} },
		equal:          func(a, b LogState) bool { return slices.Equal(a.Entries, b.Entries) },
		expires:        func(s LogState, l Limit) int64 { return s.ExpiresAt(int64(l.Period)) },
		denyKeepsState: true,
	}
)

// equivalent reports whether x and y are equal or have both expired at now,
// which makes them both equivalent to the zero state.
func (a algo[S]) equivalent(x, y S, l Limit, now int64) bool {
	return a.equal(x, y) || a.expires(x, l) <= now && a.expires(y, l) <= now
}

// event is an admission of cost units at (effective) time at.
type event struct{ at, cost int64 }

func sortEvents(evs []event) {
	slices.SortStableFunc(evs, func(a, b event) int { return cmp.Compare(a.at, b.at) })
}

// maxInWindow returns the largest total cost of events in a half-open
// interval (t-length, t], and the t at which it is reached.
func maxInWindow(evs []event, length int64) (most, at int64) {
	evs = slices.Clone(evs)
	sortEvents(evs)
	var sum int64
	lo := 0
	for hi, e := range evs {
		sum += e.cost
		for evs[lo].at <= e.at-length {
			sum -= evs[lo].cost
			lo++
		}
		// Include every event at the same instant before comparing.
		if (hi+1 == len(evs) || evs[hi+1].at != e.at) && sum > most {
			most, at = sum, e.at
		}
	}
	return most, at
}

// TestTokenProperties: over any closed interval [a, b] the admitted cost is at
// most Capacity + Limit×(b-a)/Period, even with the clock stepping backwards.
func TestTokenProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, huge := drawLimit(t, TokenBucket)
		var evs []event
		runOps(t, tokenAlgo, l, int64(l.Period), huge, func(in TokenState, now, cost int64, res Result) {
			if res.Allowed && cost > 0 {
				evs = append(evs, event{now, cost})
			}
		})
		sortEvents(evs)
		capacity := big.NewInt(l.Capacity())
		rate, period := big.NewInt(l.Limit), big.NewInt(int64(l.Period))
		var lhs, rhs, sum big.Int
		for i := range evs {
			sum.SetInt64(0)
			for j := i; j < len(evs); j++ {
				sum.Add(&sum, big.NewInt(evs[j].cost))
				// (sum - capacity) × Period <= Limit × (b - a)
				lhs.Sub(&sum, capacity)
				lhs.Mul(&lhs, period)
				rhs.Mul(rate, big.NewInt(evs[j].at-evs[i].at))
				if lhs.Cmp(&rhs) > 0 {
					t.Fatalf("admitted %v units in [%d, %d] (%d ns), more than %d + %d×%d/%d",
						&sum, evs[i].at, evs[j].at, evs[j].at-evs[i].at, l.Capacity(), l.Limit, l.Period, int64(l.Period))
				}
			}
		}
	})
}

// windowModel counts admissions per aligned window, at the effective time
// max(now, Start) documented for the window algorithms.
type windowModel struct {
	period int64
	counts map[int64]int64 // window start -> admitted cost
	evs    []event
}

func (m *windowModel) admit(at, cost int64) {
	m.counts[at-at%m.period] += cost
	m.evs = append(m.evs, event{at, cost})
}

// TestFixedWindowProperties: the fixed window admits exactly while the aligned
// window holds fewer than Limit units, and never more.
func TestFixedWindowProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, huge := drawLimit(t, FixedWindow)
		p := int64(l.Period)
		m := windowModel{period: p, counts: map[int64]int64{}}
		runOps(t, fixedAlgo, l, p, huge, func(in WindowState, now, cost int64, res Result) {
			eff := max(now, in.Start)
			w := eff - eff%p
			if want := m.counts[w]+cost <= l.Limit; res.Allowed != want {
				t.Fatalf("now %d (window %d holds %d) cost %d: allowed %v, want %v", now, w, m.counts[w], cost, res.Allowed, want)
			}
			if res.Allowed {
				m.admit(eff, cost)
			}
			if want := l.Limit - m.counts[w]; res.Remaining != want {
				t.Fatalf("Remaining %d, want %d", res.Remaining, want)
			}
		})
		for w, c := range m.counts {
			if c > l.Limit {
				t.Fatalf("window %d admitted %d > %d", w, c, l.Limit)
			}
		}
	})
}

// TestSlidingWindowProperties: the sliding window's decisions match its
// estimate computed from the admissions (with exact rational arithmetic);
// each aligned window admits at most Limit and any interval of length Period
// fewer than 2×Limit.
func TestSlidingWindowProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, huge := drawLimit(t, SlidingWindow)
		p := int64(l.Period)
		m := windowModel{period: p, counts: map[int64]int64{}}
		runOps(t, slidingAlgo, l, p, huge, func(in WindowState, now, cost int64, res Result) {
			eff := max(now, in.Start)
			w := eff - eff%p
			// ceil(prev × (p - elapsed) / p) + cur
			num := new(big.Int).Mul(big.NewInt(m.counts[w-p]), big.NewInt(p-(eff-w)))
			num.Add(num, big.NewInt(p-1))
			est := num.Div(num, big.NewInt(p)).Int64() + m.counts[w]
			if want := cost == 0 || est+cost <= l.Limit; res.Allowed != want {
				t.Fatalf("now %d estimate %d cost %d: allowed %v, want %v", now, est, cost, res.Allowed, want)
			}
			if res.Allowed {
				m.admit(eff, cost)
				est += cost
			}
			if want := max(l.Limit-est, 0); res.Remaining != want {
				t.Fatalf("Remaining %d, want %d", res.Remaining, want)
			}
		})
		for w, c := range m.counts {
			if c > l.Limit {
				t.Fatalf("window %d admitted %d > %d", w, c, l.Limit)
			}
		}
		if most, at := maxInWindow(m.evs, p); most >= 2*l.Limit {
			t.Fatalf("admitted %d >= 2×%d in (%d, %d]", most, l.Limit, at-p, at)
		}
	})
}

// TestSlidingLogProperties: the log admits exactly while the admissions in
// (t-Period, t] leave room, so every such interval holds at most Limit, at the
// effective times max(now, newest entry), even with the clock stepping
// backwards.
func TestSlidingLogProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, huge := drawLimit(t, SlidingLog)
		p := int64(l.Period)
		var evs []event
		runOps(t, logAlgo, l, p, huge, func(in LogState, now, cost int64, res Result) {
			eff := now
			if n := len(in.Entries); n > 0 {
				eff = max(eff, in.Entries[n-1].At)
			}
			var used int64
			for _, e := range evs {
				if e.at > eff-p {
					used += e.cost
				}
			}
			if want := cost == 0 || used+cost <= l.Limit; res.Allowed != want {
				t.Fatalf("now %d (eff %d) holds %d cost %d: allowed %v, want %v", now, eff, used, cost, res.Allowed, want)
			}
			if res.Allowed && cost > 0 {
				evs = append(evs, event{eff, cost})
				used += cost
			}
			if want := l.Limit - used; res.Remaining != want {
				t.Fatalf("Remaining %d, want %d", res.Remaining, want)
			}
		})
		if most, at := maxInWindow(evs, p); most > l.Limit {
			t.Fatalf("admitted %d > %d in (%d, %d]", most, l.Limit, at-p, at)
		}
	})
}

// TestConcurrencyProperties compares Acquire and Release with a model (a map
// of live leases): decisions, Remaining, ResetAfter and the leases held must
// match, the live leases never sum to more than Limit, RetryAfter is exact,
// and an expired state behaves as the zero state.
func TestConcurrencyProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l, huge := drawLimit(t, Concurrency)
		maxTTL := int64(1000)
		if huge {
			maxTTL = int64(MaxPeriod)
		}
		model := map[uint64]Lease{}
		var s LeaseState
		now := drawStart(t, huge)
		n := rapid.IntRange(1, 120).Draw(t, "ops")
		for range n {
			now, _ = drawStep(t, now, maxTTL/2)
			id := rapid.Uint64Range(1, 6).Draw(t, "id")
			in := LeaseState{Leases: slices.Clone(s.Leases)}
			for k, le := range model {
				if le.Expires <= now {
					delete(model, k)
				}
			}
			var inflight int64
			for _, le := range model {
				inflight += le.Cost
			}
			var (
				next LeaseState
				res  Result
			)
			cost := int64(0)
			if rapid.IntRange(0, 3).Draw(t, "release") == 0 {
				var held bool
				next, res, held = Release(s, l, now, id)
				_, want := model[id]
				if held != want {
					t.Fatalf("Release(%d) held = %v, want %v", id, held, want)
				}
				if want {
					inflight -= model[id].Cost
					delete(model, id)
				}
				if !res.Allowed || res.RetryAfter != 0 {
					t.Fatalf("Release result %+v", res)
				}
			} else {
				cost = drawCost(t, l.Limit)
				ttl := time.Duration(rapid.Int64Range(1, maxTTL).Draw(t, "ttl"))
				var err error
				next, res, err = Acquire(s, l, now, cost, id, ttl)
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				var held int64
				if cost > 0 {
					held = model[id].Cost
				}
				want := cost == 0 || inflight-held+cost <= l.Limit
				if res.Allowed != want {
					t.Fatalf("now %d in flight %d (id %d holds %d) cost %d: allowed %v, want %v",
						now, inflight, id, held, cost, res.Allowed, want)
				}
				if res.Allowed && cost > 0 {
					model[id] = Lease{ID: id, Cost: cost, Expires: now + int64(ttl)}
					inflight += cost - held
				}
				if !res.Allowed {
					r := int64(res.RetryAfter)
					if r <= 0 {
						t.Fatalf("denied with RetryAfter %v", res.RetryAfter)
					}
					c := LeaseState{Leases: slices.Clone(next.Leases)}
					if _, res2, _ := Acquire(c, l, now+r, cost, id, ttl); !res2.Allowed {
						t.Fatalf("denied at now+RetryAfter: %+v", res2)
					}
					c = LeaseState{Leases: slices.Clone(next.Leases)}
					if _, res2, _ := Acquire(c, l, now+r-1, cost, id, ttl); res2.Allowed {
						t.Fatalf("allowed at now+RetryAfter-1ns: %+v", res2)
					}
				} else if res.RetryAfter != 0 {
					t.Fatalf("allowed with RetryAfter %v", res.RetryAfter)
				}
			}
			if inflight > l.Limit {
				t.Fatalf("in flight %d > %d", inflight, l.Limit)
			}
			var last int64
			for _, le := range model {
				last = max(last, le.Expires)
			}
			if want := (Result{Allowed: res.Allowed, Limit: l.Limit, Remaining: l.Limit - inflight,
				ResetAfter: time.Duration(max(last-now, 0)), RetryAfter: res.RetryAfter}); res != want {
				t.Fatalf("result %+v, want %+v", res, want)
			}
			got := map[uint64]Lease{}
			for _, le := range next.Leases {
				got[le.ID] = le
			}
			if len(got) != len(next.Leases) || len(got) != len(model) {
				t.Fatalf("leases %v, want %v", next.Leases, model)
			}
			for k, le := range model {
				if got[k] != le {
					t.Fatalf("leases %v, want %v", next.Leases, model)
				}
			}
			if !res.Allowed {
				// A deny changes nothing but dropping expired leases.
				live := slices.DeleteFunc(slices.Clone(in.Leases), func(le Lease) bool { return le.Expires <= now })
				slices.SortStableFunc(live, func(a, b Lease) int { return cmp.Compare(a.Expires, b.Expires) })
				if !slices.Equal(live, next.Leases) {
					t.Fatalf("deny changed the leases: %v -> %v", in.Leases, next.Leases)
				}
			}
			s = next
			if rapid.IntRange(0, 9).Draw(t, "checkExpiry") == 0 {
				at := max(s.ExpiresAt(), now) + rapid.Int64Range(0, maxTTL).Draw(t, "afterExpiry")
				c := drawCost(t, l.Limit)
				s1, r1, _ := Acquire(LeaseState{Leases: slices.Clone(s.Leases)}, l, at, c, id, time.Second)
				s2, r2, _ := Acquire(LeaseState{}, l, at, c, id, time.Second)
				if r1 != r2 || !slices.Equal(s1.Leases, s2.Leases) {
					t.Fatalf("expired state gives %+v %v, zero gives %+v %v", r1, s1, r2, s2)
				}
			}
		}
	})
}
