package store

import (
	"testing"
	"time"

	"github.com/sluice-rl/sluice/bucket"
)

// TestHitsDeniedTakeIsKept: a fixed_window_hits take counts even when it
// is denied, so a denied take of a new key inserts it (unlike every other
// algorithm), and a later take sees its hits.
func TestHitsDeniedTakeIsKept(t *testing.T) {
	s := newStore(t, Config{Shards: 4})
	l := lim(bucket.FixedWindowHits, 5, time.Minute)
	res, err := s.Take(3, l, t0, 7) // over at once
	if err != nil || res.Allowed || res.Remaining != 0 {
		t.Fatalf("7 hits of 5: %+v %v", res, err)
	}
	if st := s.Stats(); st.Keys != 1 || st.Bytes != windowEntryBytes {
		t.Fatalf("a denied hits take was not kept: %+v", st)
	}
	if res, _ := s.Take(3, l, t0+1, 0); res.Allowed {
		t.Fatalf("read after 7 hits of 5: %+v, want over", res)
	}
	// A read of an absent key inserts nothing.
	if res, _ := s.Take(4, l, t0, 0); !res.Allowed || res.Remaining != 5 || s.Stats().Keys != 1 {
		t.Fatalf("read of an absent key: %+v %+v", res, s.Stats())
	}
	checkCounters(t, s)
}

// TestHitsHandoff: a hits state leaves with Extract and Export and merges
// on Import like a fixed window (same window: the larger count).
func TestHitsHandoff(t *testing.T) {
	src := newStore(t, Config{Shards: 4})
	dst := newStore(t, Config{Shards: 4})
	l := lim(bucket.FixedWindowHits, 5, time.Minute)
	for range 4 {
		if _, err := src.Take(8, l, t0, 2); err != nil {
			t.Fatal(err)
		}
	}
	var got []Entry
	src.Export(t0, nil, func(e Entry) bool { got = append(got, e); return true })
	if len(got) != 1 || got[0].Algorithm != bucket.FixedWindowHits || got[0].Window.Cur != 8 {
		t.Fatalf("export: %+v", got)
	}
	if _, err := dst.Take(8, l, t0, 3); err != nil {
		t.Fatal(err)
	}
	if err := dst.Import(got[0], t0); err != nil {
		t.Fatal(err)
	}
	if res, _ := dst.Take(8, l, t0, 1); res.Allowed || res.Remaining != 0 {
		t.Fatalf("after import of 8 hits: %+v, want over", res)
	}
	out := src.Extract(t0, []uint64{8})
	if len(out) != 1 || out[0].Algorithm != bucket.FixedWindowHits || src.Stats().Keys != 0 {
		t.Fatalf("extract: %+v, %+v", out, src.Stats())
	}
	// Expired hits states are swept.
	if n := dst.Sweep(t0 + int64(time.Hour)); n != 1 || dst.Stats().Keys != 0 {
		t.Fatalf("sweep dropped %d, %+v", n, dst.Stats())
	}
	checkMapsFreed(t, dst)
}
