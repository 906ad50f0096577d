package store

import (
	"github.com/sluice-rl/sluice/bucket"
)

// Extract removes the states of the given keys (all algorithms) and returns
// the live ones, e.g. to move them to a key's new owner. It locks each key's
// shard in turn.
func (s *Store) Extract(now int64, keys []uint64) []Entry {
	var out []Entry
	for _, k := range keys {
		sh := s.shardOf(k)
		sh.mu.Lock()
		from := len(out)
		out = exportShardKeys(out, sh, now, k)
		out = s.exportResv(out, from, k, now)
		s.dropResv(k)
		if removed, freed := deleteKey(sh, k); removed > 0 {
			s.keys.Add(-removed)
			s.bytes.Add(-freed)
		}
		s.untrack(k)
		sh.mu.Unlock()
	}
	return out
}

// Has reports whether key has a live state (of any algorithm) or a live
// reservation.
func (s *Store) Has(now int64, key uint64) bool {
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if v, ok := sh.tokens[key]; ok && v.ExpiresAt() > now {
		return true
	}
	if v, ok := sh.fixed[key]; ok && v.ExpiresAt() > now {
		return true
	}
	if v, ok := sh.sliding[key]; ok && v.ExpiresAt() > now {
		return true
	}
	if v, ok := sh.logs[key]; ok && v.expiresAt() > now {
		return true
	}
	if v, ok := sh.leases[key]; ok && v.ExpiresAt() > now {
		return true
	}
	if set := s.resv[s.shardIndex(key)][key]; set != nil {
		for _, r := range set.list {
			if r.Expires > now {
				return true
			}
		}
	}
	return false
}

// Delete removes the states of the given keys (all algorithms), live or
// not, and returns how many states it removed.
func (s *Store) Delete(keys []uint64) int {
	n := 0
	for _, k := range keys {
		sh := s.shardOf(k)
		sh.mu.Lock()
		removed, freed := deleteKey(sh, k)
		s.dropResv(k)
		if removed > 0 {
			s.keys.Add(-removed)
			s.bytes.Add(-freed)
			n += int(removed)
		}
		s.untrack(k)
		sh.mu.Unlock()
	}
	return n
}

// exportShardKeys appends copies of key's live states in sh: exportShard
// restricted to one key, without scanning.
func exportShardKeys(buf []Entry, sh *shard, now int64, key uint64) []Entry {
	if v, ok := sh.tokens[key]; ok && v.ExpiresAt() > now {
		buf = append(buf, Entry{Key: key, Algorithm: bucket.TokenBucket, Token: v})
	}
	if v, ok := sh.fixed[key]; ok && v.ExpiresAt() > now {
		buf = append(buf, Entry{Key: key, Algorithm: bucket.FixedWindow, Window: v})
	}
	if v, ok := sh.sliding[key]; ok && v.ExpiresAt() > now {
		buf = append(buf, Entry{Key: key, Algorithm: bucket.SlidingWindow, Window: v})
	}
	if v, ok := sh.hits[key]; ok && v.ExpiresAt() > now {
		buf = append(buf, Entry{Key: key, Algorithm: bucket.FixedWindowHits, Window: v})
	}
	if v, ok := sh.logs[key]; ok && v.expiresAt() > now {
		buf = append(buf, Entry{Key: key, Algorithm: bucket.SlidingLog,
			Log: bucket.LogState{Entries: append([]bucket.LogEntry(nil), v.entries...)}, Period: v.period})
	}
	if v, ok := sh.leases[key]; ok && v.ExpiresAt() > now {
		buf = append(buf, Entry{Key: key, Algorithm: bucket.Concurrency,
			Leases: bucket.LeaseState{Leases: append([]bucket.Lease(nil), v.Leases...)}})
	}
	return buf
}

// deleteKey removes key from every map of sh and returns the count and
// estimated bytes removed. The caller holds sh.mu.
func deleteKey(sh *shard, key uint64) (removed, freed int64) {
	if _, ok := sh.tokens[key]; ok {
		delete(sh.tokens, key)
		removed, freed = removed+1, freed+tokenEntryBytes
	}
	if _, ok := sh.fixed[key]; ok {
		delete(sh.fixed, key)
		removed, freed = removed+1, freed+windowEntryBytes
	}
	if _, ok := sh.sliding[key]; ok {
		delete(sh.sliding, key)
		removed, freed = removed+1, freed+windowEntryBytes
	}
	if _, ok := sh.hits[key]; ok {
		delete(sh.hits, key)
		removed, freed = removed+1, freed+windowEntryBytes
	}
	if v, ok := sh.logs[key]; ok {
		delete(sh.logs, key)
		removed, freed = removed+1, freed+logBytes(v.entries)
	}
	if v, ok := sh.leases[key]; ok {
		delete(sh.leases, key)
		removed, freed = removed+1, freed+leaseBytes(v.Leases)
	}
	return removed, freed
}

// Copy returns copies of the live states of the given keys (all
// algorithms), leaving them in place.
func (s *Store) Copy(now int64, keys []uint64) []Entry {
	var out []Entry
	for _, k := range keys {
		sh := s.shardOf(k)
		sh.mu.Lock()
		from := len(out)
		out = exportShardKeys(out, sh, now, k)
		out = s.exportResv(out, from, k, now)
		sh.mu.Unlock()
	}
	return out
}
