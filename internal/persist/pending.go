package persist

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/sluice-rl/sluice/store"
)

// pending is a Writer's set of states waiting for the next write, each
// key's (and algorithm's) latest, kept as their records (AppendRecord) in
// one buffer rather than as store.Entry values: a few dozen bytes a state
// instead of a map slot of over a hundred, and nothing for the garbage
// collector to scan. A key's first algorithm is found through a map of
// plain uint64 keys; a key with states of several algorithms (rare) keeps
// the others in a second map.
type pending struct {
	buf   []byte // records replaced by one of another length stay, unused, until the write
	first map[uint64]span
	more  map[recordID]span
	// The scratch of records and of the write, kept for the next use of
	// the set after reset.
	refs []ref
	out  [][]byte
	keys []byte
}

// ref is a record's identity and place, sorted by records.
type ref struct {
	key  uint64
	algo uint8
	s    span
}

// span is a record's place in pending.buf.
type span struct{ off, n uint32 }

// recordID is a record's identity: a key may hold a state per algorithm.
type recordID struct {
	key  uint64
	algo uint8
}

func newPending(hint int) *pending {
	return &pending{first: make(map[uint64]span, hint)}
}

// reset empties the set, keeping its memory for the next states.
func (p *pending) reset() {
	p.buf = p.buf[:0]
	clear(p.first)
	clear(p.more)
	clear(p.out) // no record stays reachable
	p.out = p.out[:0]
}

// len is the number of states in the set.
func (p *pending) len() int { return len(p.first) + len(p.more) }

// bytes is the memory the records take.
func (p *pending) bytes() int { return len(p.buf) }

// put adds e's state, in place of the one of its key and algorithm.
func (p *pending) put(e store.Entry) {
	off := len(p.buf)
	p.buf = AppendRecord(p.buf, e)
	s := span{uint32(off), uint32(len(p.buf) - off)}
	old, ok := p.first[e.Key]
	switch {
	case !ok:
		p.first[e.Key] = s
		return
	case p.buf[old.off+1] != byte(e.Algorithm):
		if p.more == nil {
			p.more = map[recordID]span{}
		}
		id := recordID{e.Key, uint8(e.Algorithm)}
		if old, ok = p.more[id]; !ok {
			p.more[id] = s
			return
		}
		if old.n != s.n {
			p.more[id] = s
			return
		}
	case old.n != s.n:
		p.first[e.Key] = s
		return
	}
	// The same length (a token bucket's always is): overwrite in place.
	copy(p.buf[old.off:], p.buf[off:])
	p.buf = p.buf[:off]
}

// records returns the set's records in key and algorithm order: neighbouring
// keys share B+tree pages, so that each page is found, copied and written
// once per write.
// The slice and the records are the set's until its reset.
func (p *pending) records() [][]byte {
	refs := p.refs[:0]
	for k, s := range p.first {
		refs = append(refs, ref{k, p.buf[s.off+1], s})
	}
	for id, s := range p.more {
		refs = append(refs, ref{id.key, id.algo, s})
	}
	slices.SortFunc(refs, func(a, b ref) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return cmp.Compare(a.algo, b.algo)
	})
	out := p.out[:0]
	for _, r := range refs {
		out = append(out, p.buf[r.s.off:r.s.off+r.s.n:r.s.off+r.s.n])
	}
	p.refs, p.out = refs, out
	return out
}

// putBack adds the records of a write that failed, except those whose key
// and algorithm the set holds a newer state of.
func (p *pending) putBack(recs [][]byte) {
	for _, r := range recs {
		key := binary.BigEndian.Uint64(r[2:10])
		if s, ok := p.first[key]; ok {
			if p.buf[s.off+1] == r[1] {
				continue
			}
			if _, ok := p.more[recordID{key, r[1]}]; ok {
				continue
			}
		}
		off := len(p.buf)
		p.buf = append(p.buf, r...)
		s := span{uint32(off), uint32(len(r))}
		if _, ok := p.first[key]; !ok {
			p.first[key] = s
			continue
		}
		if p.more == nil {
			p.more = map[recordID]span{}
		}
		p.more[recordID{key, r[1]}] = s
	}
}
