package bucket

import (
	"slices"
	"testing"
	"time"
)

func TestTakeLogSteps(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: 5, Period: 10 * time.Second}
	const s = time.Second
	at := func(d time.Duration) int64 { return t0 + int64(d) }
	e := func(d time.Duration, cost int64) LogEntry { return LogEntry{At: at(d), Cost: cost} }
	wantEntries := map[int][]LogEntry{
		0:  {e(0, 2)},
		2:  {e(0, 2), e(4*s, 2)}, // denied: unchanged
		4:  {e(4*s, 2), e(10*s, 2)},
		5:  {e(4*s, 2), e(10*s, 3)}, // same instant: merged
		8:  {e(4*s, 2), e(10*s, 3)}, // backwards: unchanged
		9:  {e(10*s, 3), e(14*s, 2)},
		10: {e(10*s, 3), e(14*s, 2)}, // expired, but a read keeps it
		11: {e(40*s, 1)},
	}
	runSteps(t, TakeLog, l, LogState{}, []step{
		{t: at(0), cost: 2, allowed: true, remaining: 3, resetAfter: 10 * s},
		{t: at(4 * s), cost: 2, allowed: true, remaining: 1, resetAfter: 10 * s},
		// A deny consumes nothing; two units free up when the first entry
		// leaves the window at t0+10s.
		{t: at(6 * s), cost: 2, remaining: 1, resetAfter: 8 * s, retryAfter: 4 * s},
		{t: at(10*s - 1), cost: 2, remaining: 1, resetAfter: 4*s + 1, retryAfter: 1},
		// The window is half-open: an entry at t counts until t+Period, excluded.
		{t: at(10 * s), cost: 2, allowed: true, remaining: 1, resetAfter: 10 * s},
		{t: at(10 * s), cost: 1, allowed: true, remaining: 0, resetAfter: 10 * s},
		{t: at(12 * s), cost: 0, allowed: true, remaining: 0, resetAfter: 8 * s},
		// The clock steps back: clamped to the newest entry.
		{t: at(7 * s), cost: 0, allowed: true, remaining: 0, resetAfter: 13 * s},
		{t: at(7 * s), cost: 1, remaining: 0, resetAfter: 13 * s, retryAfter: 7 * s},
		{t: at(14 * s), cost: 2, allowed: true, remaining: 0, resetAfter: 10 * s},
		// Expired: empty.
		{t: at(40 * s), cost: 0, allowed: true, remaining: 5},
		{t: at(40 * s), cost: 1, allowed: true, remaining: 4, resetAfter: 10 * s},
		{t: at(40 * s), cost: 6, err: ErrCostExceedsCapacity},
		{t: at(40 * s), cost: -1, err: ErrNegativeCost},
	}, func(i int, s LogState) {
		if want, ok := wantEntries[i]; ok && !slices.Equal(s.Entries, want) {
			t.Errorf("step %d: entries %v, want %v", i, s.Entries, want)
		}
	})
}

// TestTakeLogReusesArray: dropping old entries and appending a new one
// reuses the backing array when it has room.
func TestTakeLogReusesArray(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: 3, Period: 10}
	s := LogState{Entries: make([]LogEntry, 0, 3)}
	base := &s.Entries[:1][0]
	var now int64 = 1000
	allocs := testing.AllocsPerRun(100, func() {
		var res Result
		s, res, _ = TakeLog(s, l, now, 1)
		if !res.Allowed {
			t.Fatalf("denied at %d: %+v", now, res)
		}
		now += 4
	})
	if allocs != 0 {
		t.Errorf("%v allocs per take, want 0", allocs)
	}
	if &s.Entries[:1][0] != base {
		t.Error("backing array replaced")
	}
}

func TestTakeLogExpiredIsZero(t *testing.T) {
	l := Limit{Algorithm: SlidingLog, Limit: 10, Period: time.Minute}
	var s LogState
	s, _, _ = TakeLog(s, l, t0, 3)
	s, _, _ = TakeLog(s, l, t0+int64(30*time.Second), 4)
	exp := s.ExpiresAt(int64(l.Period))
	if exp != t0+int64(90*time.Second) {
		t.Fatalf("ExpiresAt = t0+%v", time.Duration(exp-t0))
	}
	for _, now := range []int64{exp, exp + 1, exp + int64(time.Hour)} {
		for _, cost := range []int64{0, 1, 10} {
			in := LogState{Entries: slices.Clone(s.Entries)}
			gotS, got, _ := TakeLog(in, l, now, cost)
			wantS, want, _ := TakeLog(LogState{}, l, now, cost)
			equivalent := slices.Equal(gotS.Entries, wantS.Entries) ||
				cost == 0 && gotS.ExpiresAt(int64(l.Period)) <= now && wantS.ExpiresAt(int64(l.Period)) <= now
			if got != want || !equivalent {
				t.Errorf("now=exp+%d cost %d: expired gives %v %+v, zero gives %v %+v",
					now-exp, cost, gotS, got, wantS, want)
			}
		}
	}
}
