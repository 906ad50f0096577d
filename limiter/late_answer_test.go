package limiter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/identity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
	"github.com/sluice-rl/sluice/ring"
	"github.com/sluice-rl/sluice/store"
)

// lateOwner is a Peers whose every Check reaches the owner after the
// call's deadline there: the owner decides nothing and answers each item
// with its context's error, as a node answers a forwarded check that came
// late (transport rebuilds that answer as an error wrapping
// context.DeadlineExceeded). Its other calls fail unsent.
type lateOwner struct{ checks int }

func (p *lateOwner) Check(_ context.Context, _ ring.Member, _ int, items []limiter.Forwarded, out []limiter.Answer) error {
	p.checks++
	for i := range items {
		out[i] = limiter.Answer{Err: fmt.Errorf("owner: %w", context.DeadlineExceeded)}
	}
	return nil
}

func (p *lateOwner) unsent() error {
	return fmt.Errorf("%w: %w: lateOwner", limiter.ErrPeerUnavailable, limiter.ErrNotSent)
}

func (p *lateOwner) Acquire(context.Context, ring.Member, int, limiter.Forwarded, time.Duration) (limiter.Answer, store.LeaseID, error) {
	return limiter.Answer{}, store.LeaseID{}, p.unsent()
}

func (p *lateOwner) Release(context.Context, ring.Member, int, limiter.Forwarded, store.LeaseID) (limiter.Answer, bool, error) {
	return limiter.Answer{}, false, p.unsent()
}

func (p *lateOwner) Reserve(context.Context, ring.Member, int, limiter.Forwarded, time.Duration) (limiter.Answer, store.LeaseID, error) {
	return limiter.Answer{}, store.LeaseID{}, p.unsent()
}

func (p *lateOwner) Settle(context.Context, ring.Member, int, limiter.Forwarded, store.LeaseID) (limiter.Answer, limiter.SettleAnswer, error) {
	return limiter.Answer{}, limiter.SettleAnswer{}, p.unsent()
}

func (p *lateOwner) Fetch(context.Context, ring.Member, []uint64) ([]store.Entry, error) {
	return nil, p.unsent()
}

func (p *lateOwner) Handoff(context.Context, ring.Member, []store.Entry, []int) error {
	return p.unsent()
}

func (p *lateOwner) Replicate(context.Context, ring.Member, []store.Entry) error { return p.unsent() }

func (p *lateOwner) CheckAtomic(context.Context, ring.Member, int, []limiter.Forwarded, []limiter.Answer) error {
	return p.unsent()
}

func (p *lateOwner) Admin(context.Context, ring.Member, int, limiter.Forwarded, limiter.AdminOp) (limiter.KeyInfo, error) {
	return limiter.KeyInfo{}, p.unsent()
}

// A check whose owner answers that the call reached it too late (its
// deadline had passed there, so it decided nothing) is answered by the
// limit's failure mode while the caller still waits, not with the owner's
// deadline error (the e2e Partition test saw it as Internal).
func TestOwnerAnsweringLateFallsBack(t *testing.T) {
	clk := limitertest.NewClock(limitertest.Epoch)
	peers := &lateOwner{}
	l, err := limiter.New(limiter.Config{NodeName: "n0", Clock: clk.Now, Peers: peers, Replicas: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SetMembers([]ring.Member{{Name: "n0", GRPCAddr: "mem:n0"}, {Name: "n1", GRPCAddr: "mem:n1"}}); err != nil {
		t.Fatal(err)
	}
	r := l.Ring()
	key := ""
	for i := 0; key == "" && i < 10000; i++ {
		k := fmt.Sprintf("acct:%d", i)
		if m, _ := r.Owner(identity.Inline(uint8(hourly.Algorithm), hourly.Period, k)); m.Name == "n1" {
			key = k
		}
	}
	if key == "" {
		t.Fatal("no key owned by n1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := l.Check(ctx, []limiter.Request{{Key: key, Limit: hourly, Cost: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if peers.checks == 0 {
		t.Fatal("the check never went to its owner")
	}
	if res[0].Err != nil || res[0].Source != limiter.SourceFallback || !res[0].Allowed {
		t.Fatalf("got %+v (err %v), want allowed by the failure mode (source %s)", res[0].Result, res[0].Err, limiter.SourceFallback)
	}
}
