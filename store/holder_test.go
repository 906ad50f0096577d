package store

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// A lease acquired for a holder is released and renewed only with that
// holder: the right ID and tag from another holder, or from none, find
// nothing and change nothing; a lease of no holder needs none.
func TestLeaseHolder(t *testing.T) {
	s := newStore(t, Config{Shards: 1})
	l := lim(bucket.Concurrency, 2, 0)
	const a, b = 0xa, 0xb
	id, res, err := s.AcquireFor(3, l, t0, 1, time.Hour, a)
	if err != nil || !res.Allowed || id.Holder != a {
		t.Fatalf("AcquireFor = %+v, %+v, %v", id, res, err)
	}
	back, err := ParseLeaseID(id.String())
	if err != nil || back.ID != id.ID || back.Tag != id.Tag || back.Holder != 0 {
		t.Fatalf("the String form must not carry the holder: %+v, %v", back, err)
	}
	for name, other := range map[string]LeaseID{"another holder": {ID: id.ID, Tag: id.Tag, Holder: b}, "no holder": back} {
		if ok, _, _ := s.Renew(3, l, t0, 1, time.Second, other); ok {
			t.Fatalf("%s renewed the lease", name)
		}
		if ok, res, _ := s.Release(3, l, t0, other); ok || res.Remaining != 1 {
			t.Fatalf("%s: Release = %v, %+v; want false with the lease still held (remaining 1)", name, ok, res)
		}
	}
	if ok, _, _ := s.Renew(3, l, t0, 1, time.Hour, id); !ok {
		t.Fatal("the holder could not renew")
	}
	if ok, res, _ := s.Release(3, l, t0, id); !ok || res.Remaining != 2 {
		t.Fatalf("the holder's Release = %v, %+v", ok, res)
	}
	// No holder: the ID alone releases.
	id, _, _ = s.Acquire(3, l, t0, 1, time.Hour)
	if ok, _, _ := s.Release(3, l, t0, LeaseID{ID: id.ID, Tag: id.Tag}); !ok {
		t.Fatal("a lease of no holder was not released by its ID")
	}
	// The holder travels with the state (handoff, fetch).
	id, _, _ = s.AcquireFor(4, l, t0, 1, time.Hour, a)
	moved := newStore(t, Config{Shards: 1})
	ents := s.Extract(t0, []uint64{4})
	if len(ents) != 1 {
		t.Fatalf("Extract = %d entries, want 1", len(ents))
	}
	if err := moved.Import(ents[0], t0); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := moved.Release(4, l, t0, LeaseID{ID: id.ID, Tag: id.Tag, Holder: b}); ok {
		t.Fatal("a moved lease lost its holder")
	}
	if ok, _, _ := moved.Release(4, l, t0, id); !ok {
		t.Fatal("a moved lease was not released by its holder")
	}
}
