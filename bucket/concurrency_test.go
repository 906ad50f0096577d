package bucket

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestConcurrencySteps(t *testing.T) {
	l := Limit{Algorithm: Concurrency, Limit: 3}
	const s = time.Second
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	const (
		acquire = iota
		release
	)
	steps := []struct {
		op         int
		t          int64
		id         uint64
		cost       int64
		ttl        time.Duration
		allowed    bool
		held       bool // release only
		remaining  int64
		resetAfter time.Duration
		retryAfter time.Duration
		err        error
	}{
		{op: acquire, t: at(0), id: 1, cost: 1, ttl: 10 * s, allowed: true, remaining: 2, resetAfter: 10 * s},
		{op: acquire, t: at(s), id: 2, cost: 2, ttl: 5 * s, allowed: true, remaining: 0, resetAfter: 9 * s},
		// Full: lease 2 (2 units) expires at t0+6s.
		{op: acquire, t: at(2 * s), id: 3, cost: 1, ttl: 5 * s, remaining: 0, resetAfter: 8 * s, retryAfter: 4 * s},
		{op: acquire, t: at(2 * s), id: 3, cost: 0, allowed: true, remaining: 0, resetAfter: 8 * s}, // read
		{op: release, t: at(3 * s), id: 2, allowed: true, held: true, remaining: 2, resetAfter: 7 * s},
		{op: release, t: at(3 * s), id: 2, allowed: true, held: false, remaining: 2, resetAfter: 7 * s},
		{op: acquire, t: at(3 * s), id: 3, cost: 2, ttl: s, allowed: true, remaining: 0, resetAfter: 7 * s},
		// Renewal of lease 1: its own unit does not count against it.
		{op: acquire, t: at(3 * s), id: 1, cost: 1, ttl: 20 * s, allowed: true, remaining: 0, resetAfter: 20 * s},
		// Growing lease 1 to 2 units does not fit until lease 3 expires;
		// the deny keeps lease 1 as it was.
		{op: acquire, t: at(3 * s), id: 1, cost: 2, ttl: 20 * s, remaining: 0, resetAfter: 20 * s, retryAfter: s},
		{op: acquire, t: at(4 * s), id: 1, cost: 2, ttl: 20 * s, allowed: true, remaining: 1, resetAfter: 20 * s},
		// Lease 3 lapsed at t0+4s.
		{op: release, t: at(4 * s), id: 3, allowed: true, held: false, remaining: 1, resetAfter: 20 * s},
		{op: acquire, t: at(4 * s), id: 4, cost: 1, ttl: 0, err: ErrInvalidLimit},
		{op: acquire, t: at(4 * s), id: 4, cost: 1, ttl: -s, err: ErrInvalidLimit},
		{op: acquire, t: at(4 * s), id: 4, cost: 4, ttl: s, err: ErrCostExceedsCapacity},
		{op: acquire, t: at(4 * s), id: 4, cost: -1, ttl: s, err: ErrNegativeCost},
		// The clock steps back: leases keep their absolute expiry.
		{op: acquire, t: at(2 * s), id: 4, cost: 1, ttl: s, allowed: true, remaining: 0, resetAfter: 22 * s},
		{op: acquire, t: at(2 * s), id: 5, cost: 1, ttl: s, remaining: 0, resetAfter: 22 * s, retryAfter: s},
		// All expired.
		{op: acquire, t: at(30 * s), id: 5, cost: 0, allowed: true, remaining: 3},
		{op: release, t: at(30 * s), id: 1, allowed: true, remaining: 3},
	}
	var st LeaseState
	for i, tt := range steps {
		var (
			next LeaseState
			res  Result
			err  error
			held bool
		)
		if tt.op == acquire {
			next, res, err = Acquire(st, l, tt.t, tt.cost, tt.id, tt.ttl)
		} else {
			next, res, held = Release(st, l, tt.t, tt.id)
		}
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("step %d: err = %v, want %v", i, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("step %d: unexpected error %v", i, err)
			continue
		}
		want := Result{Allowed: tt.allowed, Limit: 3, Remaining: tt.remaining, ResetAfter: tt.resetAfter, RetryAfter: tt.retryAfter}
		if res != want || held != tt.held {
			t.Errorf("step %d: t0+%v id %d cost %d:\n got %+v held=%v\nwant %+v held=%v",
				i, time.Duration(tt.t-t0), tt.id, tt.cost, res, held, want, tt.held)
		}
		st = next
		if !slices.IsSortedFunc(st.Leases, func(a, b Lease) int { return int(a.Expires - b.Expires) }) {
			t.Errorf("step %d: leases not ordered by expiry: %v", i, st.Leases)
		}
	}
}

func TestAcquireTTLError(t *testing.T) {
	l := Limit{Algorithm: Concurrency, Limit: 3}
	for _, ttl := range []time.Duration{0, -1, MaxPeriod + 1} {
		_, _, err := Acquire(LeaseState{}, l, t0, 1, 1, ttl)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "ttl" || !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("ttl %v: err = %#v, want a *FieldError naming ttl", ttl, err)
		}
	}
	// A read needs no ttl.
	if _, res, err := Acquire(LeaseState{}, l, t0, 0, 1, 0); err != nil || !res.Allowed || res.Remaining != 3 {
		t.Errorf("read with ttl 0: %+v %v", res, err)
	}
}

func TestConcurrencyExpiredIsZero(t *testing.T) {
	l := Limit{Algorithm: Concurrency, Limit: 3}
	var s LeaseState
	s, _, _ = Acquire(s, l, t0, 2, 1, time.Second)
	s, _, _ = Acquire(s, l, t0, 1, 2, 2*time.Second)
	exp := s.ExpiresAt()
	if exp != t0+int64(2*time.Second) {
		t.Fatalf("ExpiresAt = t0+%v", time.Duration(exp-t0))
	}
	for _, now := range []int64{exp, exp + 1} {
		for _, cost := range []int64{0, 1, 3} {
			in := LeaseState{Leases: slices.Clone(s.Leases)}
			gotS, got, _ := Acquire(in, l, now, cost, 2, time.Second)
			wantS, want, _ := Acquire(LeaseState{}, l, now, cost, 2, time.Second)
			if got != want || !slices.Equal(gotS.Leases, wantS.Leases) {
				t.Errorf("now=exp+%d cost %d: expired gives %v %+v, zero gives %v %+v", now-exp, cost, gotS, got, wantS, want)
			}
		}
		in := LeaseState{Leases: slices.Clone(s.Leases)}
		if _, _, held := Release(in, l, now, 1); held {
			t.Errorf("now=exp+%d: released an expired lease", now-exp)
		}
	}
}

// TestAcquireUnorderedState: a state written by someone else, in any order,
// still gives an exact RetryAfter.
func TestAcquireUnorderedState(t *testing.T) {
	l := Limit{Algorithm: Concurrency, Limit: 4}
	s := LeaseState{Leases: []Lease{
		{ID: 1, Cost: 1, Expires: t0 + 30},
		{ID: 2, Cost: 1, Expires: t0 + 10},
		{ID: 3, Cost: 1, Expires: t0 + 40},
		{ID: 4, Cost: 1, Expires: t0 + 20},
	}}
	_, res, err := Acquire(s, l, t0, 2, 9, time.Second)
	if err != nil || res.Allowed || res.RetryAfter != 20 {
		t.Errorf("got %+v %v, want a deny with RetryAfter 20ns", res, err)
	}
}
