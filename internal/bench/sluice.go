package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// sluiceTarget is a Sluice cluster through the Go client.
type sluiceTarget struct {
	c     *client.Client
	limit client.Limit
	items sync.Pool // *[]client.Item, reused across calls
}

// NewSluiceTarget is a Target that checks keys at the Sluice nodes addrs
// through the Go client, each key under an inline token bucket of limit per
// period with capacity burst (0 = limit). grants turns on the client's
// local token grants (client.GrantOptions defaults).
func NewSluiceTarget(addrs []string, limit, burst int64, period time.Duration, grants bool) (Target, error) {
	cfg := client.Config{Addrs: addrs}
	if grants {
		cfg.Grants = &client.GrantOptions{}
	}
	return NewSluiceTargetConfig(cfg, limit, burst, period)
}

// NewSluiceTargetConfig is NewSluiceTarget with the whole client
// configuration (e.g. its batching knobs).
func NewSluiceTargetConfig(cfg client.Config, limit, burst int64, period time.Duration) (Target, error) {
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	return &sluiceTarget{c: c, limit: client.Limit{Limit: limit, Period: period, Burst: burst}}, nil
}

func (s *sluiceTarget) Check(ctx context.Context, keys []string, allowed []bool) error {
	p, _ := s.items.Get().(*[]client.Item)
	if p == nil {
		p = new([]client.Item)
	}
	items := (*p)[:0]
	for _, k := range keys {
		items = append(items, client.Item{Key: k, Limit: s.limit})
	}
	res, err := s.c.Check(ctx, items...)
	*p = items
	s.items.Put(p)
	if err != nil {
		return err
	}
	if len(res) != len(keys) {
		return fmt.Errorf("bench: sluice: %d results for %d keys", len(res), len(keys))
	}
	for i := range res {
		if res[i].Err != nil {
			return fmt.Errorf("bench: sluice: key %q: %w", keys[i], res[i].Err)
		}
		allowed[i] = res[i].Allowed
	}
	return nil
}

func (s *sluiceTarget) Close() error { return s.c.Close() }

// Stats returns the client's transport counters.
func (s *sluiceTarget) Stats() client.Stats { return s.c.Stats() }
