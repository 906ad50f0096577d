package limitertest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/ring"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var hourly = bucket.Limit{Algorithm: bucket.TokenBucket, Limit: 100, Period: time.Hour}

// Each fault stops exactly the calls it names: a check from n0 of a key n1
// owns reaches n1, or falls back with the cause wrapping
// ErrPeerUnavailable.
func TestNetworkFaults(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1", "n2")
	key := c.KeysOwnedBy("n0", "n1", "k", limiter.Request{Limit: hourly}, 1)[0]
	fetch := func() error { // a direct call n0 -> n1
		_, err := c.Net.Peers("n0").Fetch(context.Background(), ring.Member{Name: "n1"}, []uint64{1})
		return err
	}
	tests := []struct {
		fault   func(n *limitertest.Network)
		reached bool
	}{
		{func(*limitertest.Network) {}, true},
		{func(n *limitertest.Network) { n.Cut("n0", "n1") }, false},
		{func(n *limitertest.Network) { n.Cut("n1", "n0") }, false},
		{func(n *limitertest.Network) { n.CutOneWay("n0", "n1") }, false},
		{func(n *limitertest.Network) { n.CutOneWay("n1", "n0") }, true},
		{func(n *limitertest.Network) { n.Isolate("n1") }, false},
		{func(n *limitertest.Network) { n.Isolate("n0") }, false},
		{func(n *limitertest.Network) { n.Isolate("n2") }, true},
		{func(n *limitertest.Network) { n.Drop(limitertest.Any, "n1", 1) }, false},
		{func(n *limitertest.Network) { n.Drop("n0", limitertest.Any, 1) }, false},
		{func(n *limitertest.Network) { n.Drop("n2", "n1", 1) }, true},
		{func(n *limitertest.Network) { n.Drop("n0", "n1", 0) }, true},
		{func(n *limitertest.Network) { n.Delay("n0", "n1", time.Millisecond) }, true},
	}
	for i, tt := range tests {
		c.Net.Heal()
		tt.fault(c.Net)
		res := c.Check("n0", limiter.Request{Key: key, Limit: hourly})[0]
		err := fetch()
		if tt.reached {
			if res.Source != limiter.SourceOwner || res.Owner != "n1" || err != nil {
				t.Errorf("step %d: check %+v, fetch %v; want an answer from n1", i, res, err)
			}
			continue
		}
		if res.Source != limiter.SourceFallback || res.Owner != "n1" {
			t.Errorf("step %d: check %+v, want a fallback for owner n1", i, res)
		}
		if !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Errorf("step %d: fetch error %v, want one wrapping ErrPeerUnavailable", i, err)
		}
	}
	c.Net.Heal()
	if res := c.Check("n0", limiter.Request{Key: key, Limit: hourly})[0]; res.Source != limiter.SourceOwner {
		t.Fatalf("after Heal: %+v, want the owner's answer", res)
	}
}

// A delayed call gives up at the caller's deadline and is not delivered.
func TestNetworkDelayBoundedByContext(t *testing.T) {
	c := limitertest.NewCluster(t, nil, "n0", "n1")
	c.Net.Delay("n0", "n1", time.Hour)
	before := c.Net.Calls("n0", "n1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	var out [1]limiter.Answer
	err := c.Net.Peers("n0").Check(ctx, ring.Member{Name: "n1"}, 0, []limiter.Forwarded{{Hash: 1, Limit: hourly, Cost: 1}}, out[:])
	if !errors.Is(err, limiter.ErrPeerUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delayed call: %v, want ErrPeerUnavailable and DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("delayed call waited %s, past its deadline", waited)
	}
	if got := c.Net.Calls("n0", "n1"); got != before {
		t.Fatalf("calls %+v -> %+v: the delayed call was delivered", before, got)
	}
}

// Drop with a fraction fails about that fraction of calls, the same ones
// for the same seed; a detached node fails every call.
func TestNetworkDropIsSeeded(t *testing.T) {
	run := func() []bool {
		n := limitertest.NewNetwork(7)
		l, err := limiter.New(limiter.Config{NodeName: "b", Peers: n.Peers("b")})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		n.Attach("b", l)
		n.Drop("a", "b", 0.5)
		p := n.Peers("a")
		out := make([]bool, 200)
		for i := range out {
			_, err := p.Fetch(context.Background(), ring.Member{Name: "b"}, []uint64{uint64(i)})
			out[i] = err == nil
		}
		n.Detach("b")
		if _, err := p.Fetch(context.Background(), ring.Member{Name: "b"}, []uint64{1}); !errors.Is(err, limiter.ErrPeerUnavailable) {
			t.Fatalf("fetch from a detached node: %v", err)
		}
		return out
	}
	a, b := run(), run()
	passed := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d: %v then %v with the same seed", i, a[i], b[i])
		}
		if a[i] {
			passed++
		}
	}
	if passed < 60 || passed > 140 {
		t.Fatalf("%d of 200 calls passed at a drop rate of 0.5", passed)
	}
}

func TestClockConcurrent(t *testing.T) {
	clk := limitertest.NewClock(limitertest.Epoch)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				clk.Advance(time.Millisecond)
				_ = clk.Now()
			}
		}()
	}
	wg.Wait()
	clk.Advance(-time.Hour)
	if got := clk.Now().Sub(limitertest.Epoch); got != 400*time.Millisecond {
		t.Fatalf("clock advanced %s, want 400ms", got)
	}
}
