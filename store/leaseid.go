package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/sluice-rl/sluice/bucket"
)

// LeaseID identifies a concurrency lease: 128 bits from crypto/rand,
// unguessable, so that only the holder the ID was given to can release or
// renew the lease. The lease lives in its key's state, so an ID is also
// bound to the key: presented with another key, it finds nothing. ID is
// what package bucket keys the lease by (never 0 for a real lease); Tag is
// the rest, checked by the store. The zero LeaseID is no lease.
//
// Holder binds the lease to a holder: the tag of the client identity that
// acquired it (0 for none), recorded with the lease and compared on
// Release and Renew, so that another holder presenting ID and Tag finds
// nothing. It is not part of the String form: the holder presents its
// identity, not its tag.
type LeaseID struct {
	ID     uint64
	Tag    uint64
	Holder uint64
}

// IsZero reports whether id is the zero LeaseID (no lease).
func (id LeaseID) IsZero() bool { return id.ID == 0 && id.Tag == 0 }

// String formats id as 32 lowercase hex digits, the form the APIs hand
// out.
func (id LeaseID) String() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], id.ID)
	binary.BigEndian.PutUint64(b[8:], id.Tag)
	return hex.EncodeToString(b[:])
}

// ParseLeaseID parses the String form of a lease ID. It fails for
// anything else, including the zero ID.
func ParseLeaseID(s string) (LeaseID, error) {
	if len(s) != 32 {
		return LeaseID{}, fmt.Errorf("store: lease id %q: want 32 hex digits", s)
	}
	var b [16]byte
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return LeaseID{}, fmt.Errorf("store: lease id %q: %w", s, err)
	}
	id := LeaseID{ID: binary.BigEndian.Uint64(b[:8]), Tag: binary.BigEndian.Uint64(b[8:])}
	if id.ID == 0 {
		return LeaseID{}, fmt.Errorf("store: lease id %q: not a lease", s)
	}
	return id, nil
}

// newLeaseID returns a new random lease ID with ID != 0.
func newLeaseID() LeaseID {
	var b [16]byte
	for {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		id := LeaseID{ID: binary.BigEndian.Uint64(b[:8]), Tag: binary.BigEndian.Uint64(b[8:])}
		if id.ID != 0 && (id.ID != bucket.DebtID || id.Tag != bucket.DebtTag) {
			return id
		}
	}
}
