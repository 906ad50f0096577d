package limiter_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/activity"
	"github.com/sluice-rl/sluice/limiter"
)

// The status page's recorder sees each check the checks_total metric
// counts: the rate of checks and denials, and their keys.
func TestActivityRecordsChecks(t *testing.T) {
	rec := activity.New(activity.Config{SampleEvery: 1})
	l, err := limiter.New(limiter.Config{NodeName: "n1", Clock: func() time.Time { return t0 }, Activity: rec})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hot := limiter.Request{Key: "user:hot", Limit: tb(3, time.Hour), Cost: 1}
	cold := limiter.Request{Key: "user:cold", Limit: tb(100, time.Hour), Cost: 1}
	for range 5 {
		if _, err := l.Check(ctx, []limiter.Request{hot, hot, cold}, nil); err != nil {
			t.Fatal(err)
		}
	}
	rec.Series.Tick()
	// 10 checks of a limit of 3: 7 denied.
	if got := rec.Series.Last(0); len(got) != 1 || got[0] != (activity.Point{Checks: 15, Denials: 7}) {
		t.Errorf("series = %+v, want one interval of 15 checks, 7 denials", got)
	}
	top, total := rec.Hot.Top(0)
	if total != 15 || len(top) != 2 || top[0].Key != "user:hot" || top[0].Count != 10 || top[1].Key != "user:cold" || top[1].Count != 5 {
		t.Errorf("hot keys = %+v (total %d), want user:hot 10, user:cold 5", top, total)
	}
}

// BenchmarkCheckActivity is a one-item local Check, from all cores, with
// and without the status page's recorder: its cost on the hot path.
func BenchmarkCheckActivity(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			cfg := limiter.Config{NodeName: "n1", Clock: func() time.Time { return t0 }}
			if on {
				cfg.Activity = activity.New(activity.Config{})
			}
			l, err := limiter.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = "user:" + strconv.Itoa(i)
			}
			b.RunParallel(func(pb *testing.PB) {
				reqs := []limiter.Request{{Limit: tb(1_000_000_000, time.Second), Cost: 1}}
				out := make([]limiter.Result, 0, 1)
				i := 0
				for pb.Next() {
					reqs[0].Key = keys[i&1023]
					i++
					if _, err := l.Check(context.Background(), reqs, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
