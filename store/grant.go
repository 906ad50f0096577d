package store

import (
	"fmt"

	"github.com/sluice-rl/sluice/bucket"
)

// TakeUpTo spends as many units of the token bucket of key as it has now,
// up to most, and returns how many it spent and the result after spending
// them. When it has none, it spends nothing and the result is the deny of a
// one-unit take, with its RetryAfter. It serves grants: a node that is not
// a key's owner asks the owner for a batch of tokens to spend locally.
func (s *Store) TakeUpTo(key uint64, l bucket.Limit, now, most int64) (int64, bucket.Result, error) {
	if l.Algorithm != bucket.TokenBucket {
		return 0, bucket.Result{}, fmt.Errorf("%w: TakeUpTo takes a token bucket, not %s", ErrWrongAlgorithm, l.Algorithm)
	}
	if most <= 0 {
		return 0, bucket.Result{}, fmt.Errorf("%w: TakeUpTo of %d units", bucket.ErrNegativeCost, most)
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	peek, err := s.takeTokenLocked(sh, key, l, now, 0)
	if err != nil {
		return 0, bucket.Result{}, err
	}
	n := min(most, peek.Remaining)
	if n <= 0 {
		res, err := s.takeTokenLocked(sh, key, l, now, 1)
		return 0, res, err
	}
	res, err := s.takeTokenLocked(sh, key, l, now, n)
	if err != nil || !res.Allowed {
		return 0, res, err
	}
	return n, res, nil
}
