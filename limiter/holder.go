package limiter

import (
	"crypto/sha256"
	"encoding/binary"
)

// HolderTag is the tag a lease records for its holder: the first 64 bits
// of SHA-256 of the holder's identity, never 0, or 0 (no holder) for "".
// Forwarded requests carry the tag, not the identity, so the peer protocol
// stays bounded; a second holder whose identity hashes to the same 64 bits
// would need a certificate from the cluster's client CA naming it.
func HolderTag(holder string) uint64 {
	if holder == "" {
		return 0
	}
	sum := sha256.Sum256([]byte(holder))
	if t := binary.BigEndian.Uint64(sum[:8]); t != 0 {
		return t
	}
	return 1
}
