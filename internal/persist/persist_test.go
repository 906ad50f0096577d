package persist_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/internal/persist"
	"github.com/sluice-rl/sluice/store"
)

const now = int64(1_000_000_000_000)

func entries() []store.Entry {
	return []store.Entry{
		{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: now + 5e9}},
		{Key: 2, Algorithm: bucket.SlidingWindow, Window: bucket.WindowState{Start: now - 1e9, Expires: now + 9e9, Prev: 3, Cur: 4}},
		{Key: 2, Algorithm: bucket.FixedWindow, Window: bucket.WindowState{Start: now - 1e9, Expires: now + 9e9, Cur: 60}},
		{Key: 3, Algorithm: bucket.SlidingLog, Period: 10e9, Log: bucket.LogState{Entries: []bucket.LogEntry{{At: now - 1e9, Cost: 2}, {At: now, Cost: 1}}}},
		{Key: 4, Algorithm: bucket.Concurrency, Leases: bucket.LeaseState{Leases: []bucket.Lease{{ID: 7, Cost: 1, Expires: now + 3e9, Tag: 8, Holder: 9}}}},
		{Key: 5, Algorithm: bucket.FixedWindowHits, Window: bucket.WindowState{Start: now, Expires: now + 1e9, Cur: 9}},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, e := range entries() {
		got, err := persist.DecodeRecord(persist.AppendRecord(nil, e))
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Errorf("round trip of %+v: got %+v, %v", e, got, err)
		}
	}
}

func TestDecodeRecordBadInput(t *testing.T) {
	good := persist.AppendRecord(nil, entries()[3])
	for _, tc := range []struct {
		name string
		rec  []byte
		want string
	}{
		{"empty", nil, "shorter than its header"},
		{"other version", append([]byte{2}, good[1:]...), "version 2"},
		{"unknown algorithm", append([]byte{1, 99}, good[2:]...), "algorithm: unknown 99"},
		{"truncated", good[:len(good)-3], "items do not fit"},
		{"left over", append(slices.Clone(good), 0), "left over"},
		{"huge count", append(slices.Clone(good[:26]), 0x7f, 0, 0, 0, 0, 0, 0, 0), "log: "},
	} {
		_, err := persist.DecodeRecord(tc.rec)
		if !errors.Is(err, persist.ErrFormat) || !contains(err, tc.want) {
			t.Errorf("%s: err = %v, want ErrFormat naming %q", tc.name, err, tc.want)
		}
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

func FuzzDecodeRecord(f *testing.F) {
	for _, e := range entries() {
		f.Add(persist.AppendRecord(nil, e))
	}
	f.Fuzz(func(t *testing.T, rec []byte) {
		e, err := persist.DecodeRecord(rec)
		if err != nil {
			return
		}
		// What decodes encodes back to the same bytes.
		if again := persist.AppendRecord(nil, e); len(rec) >= 18 && !reflect.DeepEqual(again[18:], rec[18:]) {
			t.Fatalf("re-encoding %x gave %x", rec, again)
		}
	})
}

func load(t *testing.T, db *persist.DB, at int64) ([]store.Entry, persist.LoadStats) {
	t.Helper()
	var got []store.Entry
	st, err := db.Load(at, func(e store.Entry) { got = append(got, e) })
	if err != nil {
		t.Fatal(err)
	}
	return got, st
}

func TestWriteLoadReopen(t *testing.T) {
	dir := t.TempDir()
	db, err := persist.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(entries(), now); err != nil {
		t.Fatal(err)
	}
	// An overwrite replaces; an expired state deletes.
	upd := []store.Entry{{Key: 1, Algorithm: bucket.TokenBucket, Token: bucket.TokenState{TAT: now + 6e9}},
		{Key: 5, Algorithm: bucket.FixedWindowHits, Window: bucket.WindowState{Start: now - 2e9, Expires: now - 1e9}}}
	if err := db.Write(upd, now); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = persist.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, st := load(t, db, now)
	want := append([]store.Entry{upd[0]}, entries()[1:5]...)
	if !reflect.DeepEqual(got, want) || st.Loaded != 5 {
		t.Fatalf("loaded %+v (%+v), want %+v", got, st, want)
	}
	// At now+4s the leases (3s) are expired: skipped and deleted.
	if _, st := load(t, db, now+4e9); st.Loaded != 4 || st.Expired != 1 {
		t.Fatalf("at +4s: %+v, want 4 loaded, 1 expired", st)
	}
	if n, _ := db.Len(); n != 4 {
		t.Fatalf("%d records after load deleted the expired, want 4", n)
	}
	if n, err := db.Sweep(now + 7e9); err != nil || n != 1 {
		t.Fatalf("sweep at +7s deleted %d (%v), want 1 (the token bucket)", n, err)
	}
}

func TestOpenBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	bdb, err := bolt.Open(filepath.Join(other, persist.FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("format"), []byte{9})
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	notDB := t.TempDir()
	if err := os.WriteFile(filepath.Join(notDB, persist.FileName), []byte("not a database, just some text here"), 0o600); err != nil {
		t.Fatal(err)
	}
	locked := t.TempDir()
	held, err := persist.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	for _, tc := range []struct {
		name, dir string
		want      error
		msg       string
	}{
		{"empty", "", persist.ErrDataDir, "--data-dir: empty"},
		{"a file", file, persist.ErrDataDir, "--data-dir"},
		{"unwritable", filepath.Join(ro, "sub"), persist.ErrDataDir, "permission denied"},
		{"another version", other, persist.ErrFormat, "format version [9]"},
		{"not a database", notDB, persist.ErrDataDir, "--data-dir"},
		{"in use", locked, persist.ErrDataDir, "in use by another process"},
	} {
		if tc.name == "unwritable" && os.Geteuid() == 0 {
			continue // root writes anywhere
		}
		db, err := persist.Open(tc.dir)
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, tc.want) || !contains(err, tc.msg) {
			t.Errorf("%s: Open(%q) = %v, want %v naming %q", tc.name, tc.dir, err, tc.want, tc.msg)
		}
	}
}
