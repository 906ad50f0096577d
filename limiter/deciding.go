package limiter

import "sync"

// deciding keeps a decision on a key's state and a ring change apart. A
// node decides a key on the view it routed it with; if the view changed
// between the route and the take, the handoff of the new view may have
// taken the key's state out of the store meanwhile (waiting on the shard
// lock behind it, the take would then count the key afresh, beside its new
// owner). So a decision takes the read lock of its key's stripe, checks
// that the view is still the one it routed with, and takes under it;
// SetMembers swaps the view under every stripe's write lock, and the
// handoff comes after. Striped by key hash, as the store's shards are, so
// decisions on different keys do not share a lock word.
type deciding struct {
	stripes [decidingStripes]stripe
}

// stripe is one lock of deciding, alone on its cache line.
type stripe struct {
	sync.RWMutex
	_ [64 - 24]byte
}

const decidingStripes = 64

// of returns hash's stripe.
func (d *deciding) of(hash uint64) *stripe { return &d.stripes[hash%decidingStripes] }

// lockAll takes every stripe's write lock.
func (d *deciding) lockAll() {
	for i := range d.stripes {
		d.stripes[i].Lock()
	}
}

// lockKeys takes the write locks of the stripes of hashes, in stripe
// order (as lockAll does, so the two never deadlock), and returns their
// release.
func (d *deciding) lockKeys(hashes []uint64) func() {
	var held [decidingStripes]bool
	for _, h := range hashes {
		held[h%decidingStripes] = true
	}
	for i := range d.stripes {
		if held[i] {
			d.stripes[i].Lock()
		}
	}
	return func() {
		for i := range d.stripes {
			if held[i] {
				d.stripes[i].Unlock()
			}
		}
	}
}

// unlockAll releases what lockAll took.
func (d *deciding) unlockAll() {
	for i := range d.stripes {
		d.stripes[i].Unlock()
	}
}
