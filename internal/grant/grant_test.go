package grant

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// owner is a fake key owner with a plain token count and no refill.
type owner struct {
	mu     sync.Mutex
	tokens int64
	asks   int
	down   bool
}

func (o *owner) ask(_ context.Context, want int64) (Reply, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asks++
	if o.down {
		return Reply{}, errors.New("unreachable")
	}
	g := min(want, o.tokens)
	o.tokens -= g
	r := Reply{Granted: g, Remaining: o.tokens}
	if g == 0 {
		r.RetryAfter = time.Minute
	}
	return r, nil
}

func (o *owner) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.asks
}

// Step table: named times, one key, always mode.
func TestHolderSteps(t *testing.T) {
	ms := int64(time.Millisecond)
	t0 := int64(1_700_000_000) * int64(time.Second)
	t1 := t0 + 5*ms
	t2 := t0 + 20*ms
	t3 := t0 + 2*int64(time.Second) // past the 1s TTL
	o := &owner{tokens: 5}
	h := NewHolder(Config{})
	defer h.Close()
	steps := []struct {
		at      int64
		cost    int64
		allowed bool
		asks    int // owner asks after the step
	}{
		{t0, 1, true, 1},  // asks for max(target, cost) = 1
		{t0, 1, true, 2},  // spent: asks again
		{t1, 3, true, 3},  // asks for 3: the owner's last 3
		{t1, 1, false, 4}, // the owner has none: denied, cached for its retry-after
		{t2, 1, false, 4}, // cached: no ask
		{t3, 1, false, 4}, // still within the owner's retry-after (1m)
	}
	for i, st := range steps {
		out, ok := h.Use(context.Background(), 42, st.at, st.cost, 100, 3, true, o.ask, func() int64 { return st.at })
		h.bg.Wait() // background refills, for a deterministic count
		if !ok || out.Allowed != st.allowed {
			t.Fatalf("step %d: handled %v allowed %v, want handled, allowed %v", i, ok, out.Allowed, st.allowed)
		}
		if !out.Allowed && out.RetryAfter <= 0 {
			t.Errorf("step %d: denied without a retry-after", i)
		}
		if got := o.count(); got > st.asks {
			t.Errorf("step %d: owner asked %d times, want at most %d", i, got, st.asks)
		}
	}
	if s := h.Stats(); s.Local != uint64(len(steps)) {
		t.Errorf("Local = %d, want %d", s.Local, len(steps))
	}
}

// A short grant is spent, then the holder holds off for DenyHold before
// asking again.
func TestHolderShortGrantHolds(t *testing.T) {
	ms := int64(time.Millisecond)
	t0 := int64(1_700_000_000) * int64(time.Second)
	o := &owner{tokens: 2}
	h := NewHolder(Config{DenyHold: 10 * time.Millisecond})
	defer h.Close()
	use := func(at, cost int64) Outcome {
		out, ok := h.Use(context.Background(), 9, at, cost, 100, 10, true, o.ask, func() int64 { return at })
		if !ok {
			t.Fatalf("at +%dms: not handled", (at-t0)/ms)
		}
		return out
	}
	if out := use(t0, 3); out.Allowed || out.RetryAfter != 10*time.Millisecond {
		t.Fatalf("cost 3 with 2 granted: %+v, want denied for DenyHold", out)
	}
	for i := 0; i < 2; i++ {
		if !use(t0, 1).Allowed {
			t.Fatalf("short-granted token %d was not spendable", i)
		}
	}
	if use(t0+5*ms, 1).Allowed || o.count() != 1 {
		t.Fatalf("within the hold: allowed or asked (%d asks), want a cached deny", o.count())
	}
	o.mu.Lock()
	o.tokens = 5
	o.mu.Unlock()
	// After the hold, within Refill of the short grant, the key is at its
	// limit: the check is denied here while one ask goes in the
	// background, whose tokens admit the next checks.
	if use(t0+11*ms, 1).Allowed {
		t.Fatalf("after the hold, the owner short 11ms ago: allowed, want a deny while asking in the background")
	}
	h.bg.Wait()
	if o.count() != 2 {
		t.Fatalf("after the hold: %d asks, want one more, in the background", o.count())
	}
	if !use(t0+12*ms, 1).Allowed || o.count() != 2 {
		t.Fatalf("the background grant's tokens: want an allow without asking (%d asks)", o.count())
	}
}

// A key that was short more than Refill ago is asked for at once again:
// a check waits for its owner rather than be denied on stale news.
func TestHolderShortIsForgotten(t *testing.T) {
	ms := int64(time.Millisecond)
	t0 := int64(1_700_000_000) * int64(time.Second)
	o := &owner{tokens: 2}
	h := NewHolder(Config{DenyHold: 10 * time.Millisecond, Refill: 100 * time.Millisecond})
	defer h.Close()
	use := func(at, cost int64) Outcome {
		out, ok := h.Use(context.Background(), 9, at, cost, 100, 10, true, o.ask, func() int64 { return at })
		if !ok {
			t.Fatalf("at +%dms: not handled", (at-t0)/ms)
		}
		return out
	}
	if use(t0, 3).Allowed { // 2 of 3 granted: short
		t.Fatal("cost 3 with 2 granted: allowed")
	}
	o.mu.Lock()
	o.tokens = 5
	o.mu.Unlock()
	if !use(t0+150*ms, 3).Allowed || o.count() != 2 {
		t.Fatalf("150ms after the short grant: want an ask at once and an allow (%d asks)", o.count())
	}
}

// Auto mode leaves cold keys to the owner; an unreachable owner is not
// answered from a grant.
func TestHolderAutoAndUnreachable(t *testing.T) {
	t0 := int64(1_700_000_000) * int64(time.Second)
	o := &owner{tokens: 1000}
	h := NewHolder(Config{Threshold: 10})
	defer h.Close()
	for i := 0; i < 9; i++ {
		if _, ok := h.Use(context.Background(), 7, t0, 1, 1000, 100, false, o.ask, func() int64 { return t0 }); ok {
			t.Fatalf("check %d below the threshold was answered from a grant", i)
		}
	}
	if _, ok := h.Use(context.Background(), 7, t0, 1, 1000, 100, false, o.ask, func() int64 { return t0 }); !ok {
		t.Fatal("the 10th check at the threshold was not granted")
	}
	down := &owner{down: true}
	if _, ok := h.Use(context.Background(), 8, t0, 1, 1000, 100, true, down.ask, func() int64 { return t0 }); ok {
		t.Fatal("answered from a grant although the owner was unreachable")
	}
}

// Every granted token is spent or counted expired: those left when the
// grant's TTL passes, and those of a key Sweep drops.
func TestHolderCountsGrantedAndExpired(t *testing.T) {
	ms := int64(time.Millisecond)
	t0 := int64(1_700_000_000) * int64(time.Second)
	o := &owner{tokens: 1000}
	h := NewHolder(Config{})
	defer h.Close()
	spent := uint64(0)
	use := func(key uint64, at, cost int64) {
		out, ok := h.Use(context.Background(), key, at, cost, 1000, 50, true, o.ask, func() int64 { return at })
		h.bg.Wait()
		if !ok || !out.Allowed {
			t.Fatalf("use at %d: handled %v allowed %v", at-t0, ok, out.Allowed)
		}
		spent += uint64(cost)
	}
	for i := range int64(20) {
		use(1, t0+i*ms, 2)
		use(2, t0+i*ms, 1)
	}
	s := h.Stats()
	if s.Granted <= spent || s.Expired != 0 {
		t.Fatalf("stats %+v after spending %d: want more granted than spent, none expired", s, spent)
	}
	held := s.Granted - spent
	use(1, t0+2*int64(time.Second), 1) // key 1's grant lapsed (TTL 1s)
	if s = h.Stats(); s.Expired == 0 || s.Expired >= held {
		t.Fatalf("stats %+v: want key 1's leftover counted expired, less than the %d held", s, held)
	}
	h.Sweep(t0 + 3*int64(time.Minute)) // both keys idle: dropped
	if s = h.Stats(); s.Granted != spent+s.Expired {
		t.Fatalf("stats %+v: granted %d != spent %d + expired %d", s, s.Granted, spent, s.Expired)
	}
}
