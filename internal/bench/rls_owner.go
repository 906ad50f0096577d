package bench

import (
	"context"
	"fmt"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/client"
)

// RLSCounterKey is the counter key of descriptor [{cfg.Key: value}] in
// cfg.Domain under RLSConfigYAML's rule: the reference's cache key without
// its time suffix, "domain_key_value_" (rls.CounterKey), which Sluice's
// RLS checks as a limiter key.
func RLSCounterKey(cfg RLSConfig, value string) string {
	cfg = cfg.withDefaults()
	return cfg.Domain + "_" + cfg.Key + "_" + value + "_"
}

// SluiceRLSOwner is RLSConfig.Owner for a Sluice cluster: the gRPC
// address of the node that owns a counter key, by c's view of the ring (c
// must route: client.Config.DisableRouting false). Sluice's RLS checks a
// descriptor as a FixedWindowHits limit of its rule's period, which is
// part of its bucket's identity.
func SluiceRLSOwner(c *client.Client, period time.Duration) func(ctx context.Context, counterKey string) (string, error) {
	lim := client.Limit{Algorithm: client.FixedWindowHits, Limit: 1, Period: period}
	return func(ctx context.Context, key string) (string, error) {
		m, err := c.Owner(ctx, key, "", lim)
		if err != nil {
			return "", err
		}
		return m.GRPCAddr, nil
	}
}

// owner returns the connection to the owner of most of keys' counters.
func (t *rlsTarget) owner(ctx context.Context, keys []string) (rlspb.RateLimitServiceClient, error) {
	best, bestN := "", 0
	var addrs [8]string
	var counts [8]int
	seen := 0
	for _, k := range keys {
		a, err := t.cfg.Owner(ctx, RLSCounterKey(t.cfg, k))
		if err != nil {
			return nil, fmt.Errorf("bench: RLS: owner of %q: %w", k, err)
		}
		i := 0
		for i < seen && addrs[i] != a {
			i++
		}
		if i == seen {
			if seen == len(addrs) {
				continue // more owners than a cluster of 8: count the first 8
			}
			addrs[i] = a
			seen++
		}
		counts[i]++
		if counts[i] > bestN {
			best, bestN = a, counts[i]
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if api := t.owners[best]; api != nil {
		return api, nil
	}
	conn, err := grpc.NewClient(best, grpc.WithTransportCredentials(t.creds))
	if err != nil {
		return nil, err
	}
	t.conns = append(t.conns, conn)
	api := rlspb.NewRateLimitServiceClient(conn)
	t.owners[best] = api
	return api, nil
}
