package grant

import (
	"context"
	"sync"
	"testing"
	"time"
)

// issuer is a fake owner that records its grants by id and credits a
// return once, at most what it granted.
type issuer struct {
	mu       sync.Mutex
	name     string
	tokens   int64
	next     uint64
	open     map[uint64]int64
	returned int64
}

func (o *issuer) ask(_ context.Context, want int64) (Reply, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	g := min(want, o.tokens)
	o.tokens -= g
	o.next++
	id := o.next
	if o.open == nil {
		o.open = map[uint64]int64{}
	}
	o.open[id] = g
	return Reply{Granted: g, Remaining: o.tokens, Issuer: o.name, Return: func(_ context.Context, n int64) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		n = min(n, o.open[id])
		delete(o.open, id)
		o.tokens += n
		o.returned += n
		return nil
	}}, nil
}

func (o *issuer) state() (tokens, returned int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.tokens, o.returned
}

// A holder gives back exactly the tokens it has not spent, once, from the
// grants that end; other keys keep theirs; expired grants give nothing.
func TestHolderReturns(t *testing.T) {
	ms := int64(time.Millisecond)
	t0 := int64(1_700_000_000) * int64(time.Second)
	a, b := &issuer{name: "a", tokens: 100}, &issuer{name: "b", tokens: 100}
	h := NewHolder(Config{Refill: 10 * time.Second}) // grants of most (10)
	defer h.Close()
	clock := func() int64 { return t0 }
	use := func(o *issuer, key uint64, at, cost int64) {
		t.Helper()
		if out, ok := h.Use(context.Background(), key, at, cost, 100, 10, true, o.ask, clock); !ok || !out.Allowed {
			t.Fatalf("use key %d cost %d at +%dms: %+v %v", key, cost, (at-t0)/ms, out, ok)
		}
	}
	ctx := context.Background()
	steps := []struct {
		name               string
		do                 func()
		aTokens, aReturned int64
		bTokens, bReturned int64
	}{
		{"a grants 10 for key 1, 3 spent", func() { use(a, 1, t0, 3) }, 90, 0, 100, 0},
		{"b grants 10 for key 2, 9 spent", func() { use(b, 2, t0, 9) }, 90, 0, 90, 0},
		{"key 1's owner is not a any more: 7 back to a", func() {
			h.ReturnIf(ctx, t0+ms, func(_ uint64, iss string) bool { return iss == "a" })
		}, 97, 7, 90, 0},
		{"a second return gives nothing", func() {
			h.ReturnIf(ctx, t0+ms, func(_ uint64, iss string) bool { return iss == "a" })
		}, 97, 7, 90, 0},
		{"key 1 asks again after the return", func() { use(a, 1, t0+2*ms, 1) }, 87, 7, 90, 0},
		{"idle keys return (key 2 idle since t0)", func() { h.ReturnIdle(ctx, t0+500*ms, 499*time.Millisecond) }, 87, 7, 91, 1},
		{"past the TTL nothing is returned", func() { h.Return(ctx, t0+2*int64(time.Second)) }, 87, 7, 91, 1},
	}
	for _, st := range steps {
		st.do()
		at, ar := a.state()
		bt, br := b.state()
		if at != st.aTokens || ar != st.aReturned || bt != st.bTokens || br != st.bReturned {
			t.Fatalf("%s: a %d (returned %d), b %d (returned %d); want a %d (%d), b %d (%d)",
				st.name, at, ar, bt, br, st.aTokens, st.aReturned, st.bTokens, st.bReturned)
		}
	}
	if s := h.Stats(); s.Returned != 8 || s.ReturnFailures != 0 {
		t.Fatalf("stats %+v, want 8 returned, no failures", s)
	}
	// A leaving holder returns all it holds.
	use(b, 3, t0+3*int64(time.Second), 4)
	h.Return(ctx, t0+3*int64(time.Second))
	if bt, br := b.state(); bt != 87 || br != 7 {
		t.Fatalf("after Return: b %d (returned %d), want 87 (7)", bt, br)
	}
}
