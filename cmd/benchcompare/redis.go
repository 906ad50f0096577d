package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/bench"
)

// tokenBucketLua is the usual Redis token bucket: one hash per key with the
// tokens left and the time they were counted, refilled at rate per second up
// to capacity, with the caller's clock.
const tokenBucketLua = `local capacity, rate, now, cost, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens')) or capacity
local ts = tonumber(redis.call('HGET', KEYS[1], 'ts')) or now
local refill = math.min(capacity, tokens + (now - ts) * rate)
if refill < cost then return 0 end
redis.call('HSET', KEYS[1], 'tokens', refill - cost, 'ts', now)
redis.call('EXPIRE', KEYS[1], ttl)
return 1
`

// redisTarget checks keys with the Lua token bucket through EVALSHA: one
// EVALSHA per check, pipelined when a call has several keys.
type redisTarget struct {
	rdb    *redis.Client
	script *redis.Script
	// The script's arguments that do not change: capacity, rate (tokens per
	// second) and ttl (seconds), formatted once.
	capacity, rate, ttl string
}

var _ bench.Target = (*redisTarget)(nil)

// newRedisTarget connects to addr with a pool of poolSize connections and
// loads the script (SCRIPT LOAD).
func newRedisTarget(ctx context.Context, addr string, poolSize int, limit, burst int64, period time.Duration) (*redisTarget, error) {
	if burst <= 0 {
		burst = limit
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:            addr,
		PoolSize:        poolSize,
		MinIdleConns:    min(poolSize, 64),
		ReadTimeout:     5 * time.Second,
		WriteTimeout:    5 * time.Second,
		DisableIdentity: true, // no CLIENT SETINFO on each new connection
	})
	rate := float64(limit) / period.Seconds()
	// The key lives while its bucket could still be short of full: the time
	// to refill from empty, plus a second.
	ttl := int64(math.Ceil(float64(burst)/rate)) + 1
	t := &redisTarget{
		rdb:      rdb,
		script:   redis.NewScript(tokenBucketLua),
		capacity: strconv.FormatInt(burst, 10),
		rate:     strconv.FormatFloat(rate, 'f', -1, 64),
		ttl:      strconv.FormatInt(ttl, 10),
	}
	if err := t.script.Load(ctx, rdb).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis: script load: %w", err)
	}
	return t, nil
}

// redisNow is the client's time in seconds, with a microsecond fraction.
func redisNow() string {
	return strconv.FormatFloat(float64(time.Now().UnixMicro())/1e6, 'f', 6, 64)
}

func (t *redisTarget) args(now string) []any {
	return []any{t.capacity, t.rate, now, "1", t.ttl}
}

// Check runs one EVALSHA per key (EVAL if the script is missing); several
// keys go in one pipeline.
func (t *redisTarget) Check(ctx context.Context, keys []string, allowed []bool) error {
	now := redisNow()
	if len(keys) == 1 {
		n, err := t.script.Run(ctx, t.rdb, keys, t.args(now)...).Int64()
		if err != nil {
			return err
		}
		allowed[0] = n == 1
		return nil
	}
	pipe := t.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	args := t.args(now)
	for i, k := range keys {
		cmds[i] = t.script.EvalSha(ctx, pipe, []string{k}, args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for i, c := range cmds {
		n, err := c.Int64()
		if err != nil {
			return err
		}
		allowed[i] = n == 1
	}
	return nil
}

func (t *redisTarget) Close() error { return t.rdb.Close() }

// flushAll empties the server (the script cache stays).
func (t *redisTarget) flushAll(ctx context.Context) error {
	return t.rdb.FlushAll(ctx).Err()
}

// usedMemory returns INFO memory's used_memory in bytes.
func (t *redisTarget) usedMemory(ctx context.Context) (int64, error) {
	info, err := t.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis: no used_memory in INFO memory")
}

// dbSize returns the number of keys.
func (t *redisTarget) dbSize(ctx context.Context) (int64, error) {
	return t.rdb.DBSize(ctx).Result()
}
