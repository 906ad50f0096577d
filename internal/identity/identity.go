// Package identity owns the hash that names a bucket: nodes key their store
// by it and place it on the ring, and the Go client computes the same hash
// to send each check straight to its owner. Both sides must agree bit for
// bit, so the function lives here once.
package identity

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// Policy is the identity of key's bucket under the named policy, whose
// algorithm is alg (the bucket.Algorithm / sluice.v1 Algorithm number, 1 to
// 5; token bucket is 1).
func Policy(alg uint8, policy, key string) uint64 {
	var d xxhash.Digest
	d.Reset()
	head := [3]byte{alg, 'p', 0}
	_, _ = d.Write(head[:2])
	_, _ = d.WriteString(policy)
	_, _ = d.Write(head[2:3]) // a zero separator
	_, _ = d.WriteString(key)
	return d.Sum64()
}

// Inline is the identity of key's bucket under an inline limit of
// algorithm alg and the given period. The limit's numbers are not part of
// it, so changing them keeps the state.
func Inline(alg uint8, period time.Duration, key string) uint64 {
	var d xxhash.Digest
	d.Reset()
	var head [11]byte // the last byte is a zero separator
	head[0] = alg
	head[1] = 'i'
	p := uint64(period)
	for b := 0; b < 8; b++ {
		head[2+b] = byte(p >> (8 * b))
	}
	_, _ = d.Write(head[:])
	_, _ = d.WriteString(key)
	return d.Sum64()
}

// Calendar is the identity of key's bucket under an inline calendar limit
// of algorithm alg, calendar cal (the bucket.Calendar number, 1 to 4) and
// the IANA zone name zone ("UTC" for UTC). Its second byte, 'c', sets it
// apart from every Inline identity ('i') whatever the period, and the zone
// is part of it: a day in Europe/Berlin is not a day in UTC.
func Calendar(alg, cal uint8, zone, key string) uint64 {
	var d xxhash.Digest
	d.Reset()
	head := [4]byte{alg, 'c', cal, 0}
	_, _ = d.Write(head[:3])
	_, _ = d.WriteString(zone)
	_, _ = d.Write(head[3:]) // a zero separator
	_, _ = d.WriteString(key)
	return d.Sum64()
}
