package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/client"
)

// runMemory is scenario e for one system: fill one server with r.o.keysE
// distinct keys and read its memory.
func (r *runner) runMemory(ctx context.Context, sys string) MemResult {
	m := MemResult{System: sys, Keys: r.o.keysE}
	r.logf("(e) %s: filling %s distinct keys", memSystemName(sys), fmtInt(r.o.keysE))
	var err error
	switch sys {
	case "sluice":
		err = r.memSluice(ctx, &m)
	case "redis":
		err = r.memRedis(ctx, &m)
	default:
		err = fmt.Errorf("unknown system %q", sys)
	}
	if err != nil {
		m.Error = err.Error()
	}
	return m
}

// memKey is the i-th key of scenario e.
func memKey(i int64) string { return "k:" + strconv.FormatInt(i, 10) }

// fill calls batch(lo, hi) for [0, n) in chunks of memBatch from memFillers
// goroutines, and returns the first error.
func fill(ctx context.Context, n int64, batch func(ctx context.Context, lo, hi int64) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range memFillers {
		wg.Go(func() {
			for ctx.Err() == nil {
				lo := next.Add(memBatch) - memBatch
				if lo >= n {
					return
				}
				if err := batch(ctx, lo, min(lo+memBatch, n)); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

func (r *runner) memSluice(ctx context.Context, m *MemResult) error {
	nodes, err := startSluice(ctx, r.cs, r.o.sluiceBin, 1, "sluice-e-", r.o.nodeEnv())
	if err != nil {
		return err
	}
	nd := nodes[0]
	defer nd.Stop(5 * time.Second)
	if m.RSSBefore, err = procRSS(nd.Pid()); err != nil {
		return err
	}
	cl, err := client.New(client.Config{Addrs: []string{nd.grpc}, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	lim := client.Limit{Limit: limitN, Burst: limitBurst, Period: memPeriod}
	var itemErrs atomic.Int64
	var firstItemErr atomic.Value
	start := time.Now()
	err = fill(ctx, m.Keys, func(ctx context.Context, lo, hi int64) error {
		items := make([]client.Item, 0, hi-lo)
		for i := lo; i < hi; i++ {
			items = append(items, client.Item{Key: memKey(i), Limit: lim})
		}
		res, err := cl.Check(ctx, items...)
		if err != nil {
			return err
		}
		for _, x := range res {
			if x.Err != nil {
				itemErrs.Add(1)
				firstItemErr.CompareAndSwap(nil, x.Err.Error())
			}
		}
		return nil
	})
	m.FillSec = time.Since(start).Seconds()
	if err != nil {
		return err
	}
	m.Filled = m.Keys - itemErrs.Load()
	if m.RSS, err = procRSS(nd.Pid()); err != nil {
		return err
	}
	if n := itemErrs.Load(); n > 0 {
		return fmt.Errorf("%d keys not stored, first: %v", n, firstItemErr.Load())
	}
	return nil
}

func (r *runner) memRedis(ctx context.Context, m *MemResult) error {
	if r.redisErr != nil {
		return fmt.Errorf("not started: %w", r.redisErr)
	}
	t, err := newRedisTarget(ctx, r.redisAddr, 2*memFillers, limitN, limitBurst, memPeriod)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.flushAll(ctx); err != nil {
		return err
	}
	// Give the memory back whatever happens: the server stays up until exit.
	defer func() { _ = t.flushAll(context.WithoutCancel(ctx)) }()
	if m.RSSBefore, err = procRSS(r.redis.Pid()); err != nil {
		return err
	}
	var denied atomic.Int64
	start := time.Now()
	err = fill(ctx, m.Keys, func(ctx context.Context, lo, hi int64) error {
		keys := make([]string, 0, hi-lo)
		for i := lo; i < hi; i++ {
			keys = append(keys, memKey(i))
		}
		allowed := make([]bool, len(keys))
		if err := t.Check(ctx, keys, allowed); err != nil {
			return err
		}
		for _, a := range allowed {
			if !a {
				denied.Add(1)
			}
		}
		return nil
	})
	m.FillSec = time.Since(start).Seconds()
	if err != nil {
		return err
	}
	n, err := t.dbSize(ctx)
	if err != nil {
		return err
	}
	m.Filled = n
	if m.RSS, err = procRSS(r.redis.Pid()); err != nil {
		return err
	}
	if m.UsedMemory, err = t.usedMemory(ctx); err != nil {
		return err
	}
	if n != m.Keys || denied.Load() > 0 {
		return fmt.Errorf("DBSIZE %d of %d keys, %d denied", n, m.Keys, denied.Load())
	}
	return nil
}
