package store

import "github.com/sluice-rl/sluice/bucket"

// A token bucket's debt below empty (bucket.TokenDebt, from a settle that
// charged more than the bucket held) is kept as a record among the key's
// reservations (bucket.TokenDebt.Record: ID bucket.DebtID), so it moves
// with the key wherever they do (Export, Copy, Extract, ExportChanged;
// Import and Replace merge it, the later end winning) and ends with them
// (the record expires when the debt's owner would be full again). It is
// not written to a data directory (internal/persist keeps no
// reservations): a full restart forgets it.

// debtLocked returns key's live token debt and the reservation set that
// holds it (nil for none), sh.mu held.
func (s *Store) debtLocked(sh *shard, key uint64, now int64) (bucket.TokenDebt, *resvSet) {
	m := s.resv[s.indexOf(sh)]
	if len(m) == 0 {
		return bucket.TokenDebt{}, nil
	}
	set := m[key]
	if set == nil {
		return bucket.TokenDebt{}, nil
	}
	for _, r := range set.list {
		if r.IsDebt() && r.Expires > now {
			return r.Debt(), set
		}
	}
	return bucket.TokenDebt{}, set
}

// setDebtLocked records d as key's token debt in place of old (the zero
// TokenDebt drops it), sh.mu held; set is the key's reservation set from
// debtLocked, nil for none.
func (s *Store) setDebtLocked(sh *shard, key uint64, set *resvSet, old, d bucket.TokenDebt, now int64) {
	if d == old {
		return
	}
	if set != nil {
		for i, r := range set.list {
			if r.IsDebt() {
				if d.Until > now {
					set.list[i] = d.Record()
				} else {
					set.list[i].Expires = now // dropped by the next prune
				}
				set.first = min(set.first, set.list[i].Expires)
				s.noteWrite(sh, key, d.Until)
				return
			}
		}
	}
	if d.Until <= now {
		return
	}
	table := s.resvOf(key)
	if set == nil {
		set = &resvSet{alg: bucket.TokenBucket}
		table[key] = set
		s.bytes.Add(resvSetBytes)
	}
	set.add(d.Record())
	s.bytes.Add(resvItemBytes)
	s.noteWrite(sh, key, d.Until)
}

// dropDebtLocked removes key's token debt (Reset), sh.mu held.
func (s *Store) dropDebtLocked(sh *shard, key uint64, now int64) {
	if d, set := s.debtLocked(sh, key, now); set != nil {
		s.setDebtLocked(sh, key, set, d, bucket.TokenDebt{}, now)
	}
}
