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
	return s.TakeUpToAs(key, l, now, most, Use{})
}

// TakeUpToAs is TakeUpTo for a key taken as as says (see TakeAs).
func (s *Store) TakeUpToAs(key uint64, l bucket.Limit, now, most int64, as Use) (int64, bucket.Result, error) {
	if l.Algorithm != bucket.TokenBucket {
		return 0, bucket.Result{}, fmt.Errorf("%w: TakeUpTo takes a token bucket, not %s", ErrWrongAlgorithm, l.Algorithm)
	}
	if most <= 0 {
		return 0, bucket.Result{}, fmt.Errorf("%w: TakeUpTo of %d units", bucket.ErrNegativeCost, most)
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	peek, err := s.takeTokenLocked(sh, key, l, now, 0, as)
	if err != nil {
		return 0, bucket.Result{}, err
	}
	n := min(most, peek.Remaining)
	if n <= 0 {
		res, err := s.takeTokenLocked(sh, key, l, now, 1, as)
		return 0, res, err
	}
	res, err := s.takeTokenLocked(sh, key, l, now, n, as)
	if err != nil || !res.Allowed {
		return 0, res, err
	}
	return n, res, nil
}

// GiveBack adds n unspent units of a grant back to the token bucket of key,
// never above capacity (bucket.GiveToken), and returns how many it added
// and the result of a read after. A key with no state is full: nothing is
// added and no state is created.
func (s *Store) GiveBack(key uint64, l bucket.Limit, now, n int64) (int64, bucket.Result, error) {
	if l.Algorithm != bucket.TokenBucket {
		return 0, bucket.Result{}, fmt.Errorf("%w: GiveBack takes a token bucket, not %s", ErrWrongAlgorithm, l.Algorithm)
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old, ok := sh.tokens[key]
	debt, set := s.debtLocked(sh, key, now)
	if (!ok || tokenIsZero(old, now)) && !debt.Owns(l, now) {
		res, err := s.takeTokenLocked(sh, key, l, now, 0, Use{})
		return 0, res, err
	}
	next, nd, given, res, err := bucket.GiveTokenDebt(s.clampedToken(sh, key, l, now), debt, l, now, n)
	if err != nil {
		return 0, bucket.Result{}, err
	}
	switch {
	case !ok && tokenIsZero(next, now):
	case !ok:
		// Only the debt was there: the state it leaves needs a new key.
		if s.insertable(sh, key, now, tokenEntryBytes) {
			if sh.tokens == nil {
				sh.tokens = make(map[uint64]bucket.TokenState)
			}
			sh.tokens[key] = next
			s.noteToken(sh, key, next)
		}
	case tokenIsZero(next, now):
		delete(sh.tokens, key)
		s.drop(sh, key, tokenEntryBytes)
	case next != old:
		sh.tokens[key] = next
		s.noteToken(sh, key, next)
	}
	s.setDebtLocked(sh, key, set, debt, nd, now)
	return given, res, nil
}
