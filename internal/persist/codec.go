package persist

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/store"
)

// The record format of one state (format version 1). A record's bbolt key
// is the state's key hash (8 bytes, big endian) and its algorithm (1
// byte): a key may hold a state of several algorithms. Its value is:
//
//	version   1 byte   formatVersion
//	algorithm 1 byte   bucket.Algorithm
//	key       8 bytes  the key hash, big endian
//	expires   8 bytes  Entry.ExpiresAt(), big endian (read alone by sweeps)
//	state     the algorithm's fields, each an 8-byte big-endian integer:
//	  token bucket:                 TAT
//	  fixed, sliding window, hits:  Start, Expires, Prev, Cur
//	  sliding log:                  Period, n, n × (At, Cost)
//	  concurrency:                  n, n × (ID, Cost, Expires, Tag, Holder)
//
// Integers are two's complement. A record of another version is refused
// (ErrFormat); so is one with bytes left over.

// formatVersion is the version byte of every record and of the data
// directory's meta bucket.
const formatVersion = 1

// headerLen is the length of a record's fixed header.
const headerLen = 1 + 1 + 8 + 8

// maxItems bounds the lease and log entries a record may hold, so that a
// corrupt count cannot make the decoder allocate without bound.
const maxItems = 1 << 20

// AppendRecord appends the record of e to b.
func AppendRecord(b []byte, e store.Entry) []byte {
	b = append(b, formatVersion, byte(e.Algorithm))
	b = binary.BigEndian.AppendUint64(b, e.Key)
	b = binary.BigEndian.AppendUint64(b, uint64(e.ExpiresAt()))
	i := func(v int64) { b = binary.BigEndian.AppendUint64(b, uint64(v)) }
	switch e.Algorithm {
	case bucket.TokenBucket:
		i(e.Token.TAT)
	case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
		i(e.Window.Start)
		i(e.Window.Expires)
		i(e.Window.Prev)
		i(e.Window.Cur)
	case bucket.SlidingLog:
		i(e.Period)
		i(int64(len(e.Log.Entries)))
		for _, l := range e.Log.Entries {
			i(l.At)
			i(l.Cost)
		}
	case bucket.Concurrency:
		i(int64(len(e.Leases.Leases)))
		for _, l := range e.Leases.Leases {
			i(int64(l.ID))
			i(l.Cost)
			i(l.Expires)
			i(int64(l.Tag))
			i(int64(l.Holder))
		}
	}
	return b
}

// recordExpires returns the expiry in a record's header.
func recordExpires(v []byte) (int64, error) {
	if len(v) < headerLen {
		return 0, fmt.Errorf("%w: record: %d bytes, shorter than its header", ErrFormat, len(v))
	}
	if v[0] != formatVersion {
		return 0, fmt.Errorf("%w: record: version %d, want %d", ErrFormat, v[0], formatVersion)
	}
	return int64(binary.BigEndian.Uint64(v[10:18])), nil
}

// DecodeRecord decodes a record made by AppendRecord. The error wraps
// ErrFormat and names the field. It does not check the state's values
// (store.Entry.Validate does, when the state is imported).
func DecodeRecord(v []byte) (store.Entry, error) {
	var e store.Entry
	if _, err := recordExpires(v); err != nil {
		return e, err
	}
	e.Algorithm = bucket.Algorithm(v[1])
	e.Key = binary.BigEndian.Uint64(v[2:10])
	rest := v[headerLen:]
	bad := func(field string) error {
		return fmt.Errorf("%w: record %#x: %s: truncated", ErrFormat, e.Key, field)
	}
	next := func(field string, dst *int64) error {
		if len(rest) < 8 {
			return bad(field)
		}
		*dst, rest = int64(binary.BigEndian.Uint64(rest)), rest[8:]
		return nil
	}
	count := func(field string, per int) (int, error) {
		var n int64
		if err := next(field, &n); err != nil {
			return 0, err
		}
		if n < 0 || n > maxItems || int(n)*per*8 > len(rest) {
			return 0, fmt.Errorf("%w: record %#x: %s: %d items do not fit", ErrFormat, e.Key, field, n)
		}
		return int(n), nil
	}
	var err error
	switch e.Algorithm {
	case bucket.TokenBucket:
		err = next("tat", &e.Token.TAT)
	case bucket.FixedWindow, bucket.SlidingWindow, bucket.FixedWindowHits:
		for _, f := range []struct {
			name string
			dst  *int64
		}{{"start", &e.Window.Start}, {"expires", &e.Window.Expires}, {"prev", &e.Window.Prev}, {"cur", &e.Window.Cur}} {
			if err = next(f.name, f.dst); err != nil {
				break
			}
		}
	case bucket.SlidingLog:
		if err = next("period", &e.Period); err != nil {
			break
		}
		var n int
		if n, err = count("log", 2); err != nil {
			break
		}
		e.Log.Entries = make([]bucket.LogEntry, n)
		for j := range e.Log.Entries { // count checked they fit
			_ = next("log.at", &e.Log.Entries[j].At)
			_ = next("log.cost", &e.Log.Entries[j].Cost)
		}
	case bucket.Concurrency:
		var n int
		if n, err = count("leases", 5); err != nil {
			break
		}
		e.Leases.Leases = make([]bucket.Lease, n)
		for j := range e.Leases.Leases {
			l := &e.Leases.Leases[j]
			var id, tag, holder int64
			_ = next("leases.id", &id)
			_ = next("leases.cost", &l.Cost)
			_ = next("leases.expires", &l.Expires)
			_ = next("leases.tag", &tag)
			_ = next("leases.holder", &holder)
			l.ID, l.Tag, l.Holder = uint64(id), uint64(tag), uint64(holder)
		}
	default:
		return e, fmt.Errorf("%w: record %#x: algorithm: unknown %d", ErrFormat, e.Key, v[1])
	}
	if err != nil {
		return e, err
	}
	if len(rest) != 0 {
		return e, fmt.Errorf("%w: record %#x: %d bytes left over", ErrFormat, e.Key, len(rest))
	}
	return e, nil
}
