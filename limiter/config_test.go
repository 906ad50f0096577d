package limiter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

func TestNewValidatesConfig(t *testing.T) {
	valid := func() limiter.Config { return limiter.Config{NodeName: "n1"} }
	tests := []struct {
		change func(*limiter.Config)
		msg    string // the error starts with it
		also   error  // a second sentinel the error wraps, if any
	}{
		{func(c *limiter.Config) { c.NodeName = "" }, "limiter: invalid config: NodeName: must not be empty", nil},
		{func(c *limiter.Config) { c.PendingTTL = -time.Second }, "limiter: invalid config: PendingTTL: must be >= 0", nil},
		{func(c *limiter.Config) { c.FetchTimeout = -time.Millisecond }, "limiter: invalid config: FetchTimeout: must be >= 0", nil},
		{func(c *limiter.Config) { c.Store.Shards = 3 }, "limiter: invalid config: Store: ", store.ErrInvalidConfig},
		{func(c *limiter.Config) { c.Ring.PartitionCount = -1 }, "limiter: invalid config: Ring: ", ring.ErrInvalidConfig},
		{func(c *limiter.Config) { c.Ring.ReplicationFactor = 1 }, "limiter: invalid config: Ring: ", ring.ErrInvalidConfig},
	}
	for i, tt := range tests {
		cfg := valid()
		tt.change(&cfg)
		l, err := limiter.New(cfg)
		if err == nil {
			l.Close()
			t.Fatalf("step %d: New succeeded, want %q", i, tt.msg)
		}
		if !errors.Is(err, limiter.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), tt.msg) {
			t.Errorf("step %d: err = %v, want %q... wrapping limiter.ErrInvalidConfig", i, err, tt.msg)
		}
		if tt.also != nil && !errors.Is(err, tt.also) {
			t.Errorf("step %d: err = %v, does not wrap %v", i, err, tt.also)
		}
	}
}

// The zero optional fields are defaults; a nil Peers is a cluster of one.
func TestNewAcceptsDefaults(t *testing.T) {
	l, err := limiter.New(limiter.Config{NodeName: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetMembers([]ring.Member{{Name: "n1"}}); err != nil {
		t.Fatalf("SetMembers(self) without Peers: %v", err)
	}
	err = l.SetMembers([]ring.Member{{Name: "n1"}, {Name: "n2"}})
	if !errors.Is(err, limiter.ErrInvalidConfig) || !strings.Contains(err.Error(), "Peers") {
		t.Fatalf("SetMembers(n1, n2) without Peers = %v, want ErrInvalidConfig naming Peers", err)
	}
	if r := l.Ring(); r == nil || r.Len() != 1 {
		t.Fatalf("ring after the refused SetMembers: %v, want the one-node ring kept", r)
	}
}

// With Replicas 0 each key has a majority of the copies: ⌊N/2⌋ heirs on a
// ring of N, at most MaxReplicas.
func TestAutoReplicas(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3, 20: limiter.MaxReplicas} {
		if got := limiter.AutoReplicas(n); got != want {
			t.Errorf("AutoReplicas(%d) = %d, want %d", n, got, want)
		}
	}
}
