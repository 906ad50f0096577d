package limiter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/limiter/limitertest"
)

// hourly is the limit of the handoff scenarios: 100 an hour, so that a
// counter does not move while a test runs on the fake clock.
var hourly = tb(100, time.Hour)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i)
	}
	return out
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("acct:%d", i)
	}
	return out
}

// noReplicas configures a node without replication: an unreachable
// owner's keys are answered by the local share (the heir acts for it
// otherwise, see acting_test.go).
func noReplicas(cfg *limiter.Config) { cfg.Replicas = -1 }

// spend takes cost of lim for every key through node on; each must be
// allowed.
func spend(t *testing.T, c *limitertest.Cluster, on string, ks []string, lim bucket.Limit, cost int64) {
	t.Helper()
	for _, k := range ks {
		res := c.Check(on, limiter.Request{Key: k, Limit: lim, Cost: cost})[0]
		if !res.Allowed || res.Err != nil {
			t.Fatalf("spend %s on %s: %+v", k, on, res)
		}
	}
}

// remainingOrFallback reads every key through node on (cost 0) and returns the keys
// whose remaining is not want, with what they read.
// With fallbackOK an answer of the limit's failure mode is accepted too.
func remainingOrFallback(t *testing.T, c *limitertest.Cluster, on string, ks []string, lim bucket.Limit, want int64, fallbackOK bool) []string {
	t.Helper()
	var bad []string
	for _, k := range ks {
		res := c.Check(on, limiter.Request{Key: k, Limit: lim})[0]
		if fallbackOK && res.Err == nil && res.Source == limiter.SourceFallback {
			continue
		}
		if res.Err != nil || res.Remaining != want || res.Source != limiter.SourceOwner {
			bad = append(bad, fmt.Sprintf("%s on %s: remaining %d source %s err %v", k, res.Owner, res.Remaining, res.Source, res.Err))
		}
	}
	return bad
}
