package limiter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
)

// A lease's TTL is capped: by the policy's max_ttl, else by the node's
// Config.MaxLeaseTTL (DefaultMaxLeaseTTL when 0). A longer TTL is refused,
// naming ttl and the cap; an absent one is DefaultLeaseTTL, or the cap when
// shorter. (One Acquire with a 24 h TTL used to lock a key for a day.)
func TestLeaseTTLCapped(t *testing.T) {
	conc := bucket.Limit{Algorithm: bucket.Concurrency, Limit: 1}
	set, err := policy.NewSet(true,
		policy.Policy{Name: "jobs", Limit: conc, MaxTTL: 2 * time.Hour},
		policy.Policy{Name: "quick", Limit: conc, MaxTTL: 30 * time.Second},
		policy.Policy{Name: "plain", Limit: conc})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(max time.Duration) *limiter.Limiter {
		l, err := limiter.New(limiter.Config{NodeName: "n1", Clock: func() time.Time { return t0 }, Policies: set, MaxLeaseTTL: max})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	def, tight := mk(0), mk(5*time.Minute)
	for i, tc := range []struct {
		l       *limiter.Limiter
		policy  string
		ttl     time.Duration
		want    time.Duration // the lease's lifetime; 0: refused
		mention string        // in the refusal
	}{
		{l: def, ttl: 24 * time.Hour, mention: "--max-lease-ttl), 1h0m0s"},
		{l: def, ttl: time.Hour, want: time.Hour},
		{l: def, ttl: 0, want: limiter.DefaultLeaseTTL},
		{l: tight, ttl: 5*time.Minute + 1, mention: "--max-lease-ttl), 5m0s"},
		{l: tight, ttl: 5 * time.Minute, want: 5 * time.Minute},
		{l: tight, policy: "jobs", ttl: 2 * time.Hour, want: 2 * time.Hour},
		{l: tight, policy: "jobs", ttl: 3 * time.Hour, mention: "max_ttl of policy jobs, 2h0m0s"},
		{l: def, policy: "quick", ttl: time.Minute, mention: "max_ttl of policy quick, 30s"},
		{l: def, policy: "quick", ttl: 0, want: 30 * time.Second},
		{l: tight, policy: "plain", ttl: time.Hour, mention: "--max-lease-ttl), 5m0s"},
		{l: def, ttl: -time.Second, mention: "must be >= 0"},
	} {
		req := limiter.AcquireRequest{Request: limiter.Request{Key: "k" + string(rune('a'+i)), Cost: 1}, TTL: tc.ttl}
		if tc.policy != "" {
			req.Policy = tc.policy
		} else {
			req.Limit = conc
		}
		lease, err := tc.l.Acquire(context.Background(), req)
		if tc.want == 0 {
			var fe *limiter.FieldError
			if !errors.As(err, &fe) || fe.Field != "ttl" || !errors.Is(err, limiter.ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("row %d: %+v, %v; want an invalid ttl mentioning %q", i, lease, err, tc.mention)
			}
			continue
		}
		if err != nil || !lease.Allowed || lease.ExpiresAfter != tc.want {
			t.Errorf("row %d: %+v, %v; want a lease of %v", i, lease, err, tc.want)
		}
	}
	if _, err := limiter.New(limiter.Config{NodeName: "n1", MaxLeaseTTL: limiter.MaxLeaseTTL + 1}); !errors.Is(err, limiter.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxLeaseTTL") {
		t.Errorf("MaxLeaseTTL above the bound: %v", err)
	}
	if _, err := limiter.New(limiter.Config{NodeName: "n1", MaxLeaseTTL: -1}); !errors.Is(err, limiter.ErrInvalidConfig) {
		t.Errorf("negative MaxLeaseTTL: %v", err)
	}
}
