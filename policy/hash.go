package policy

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/sluice-rl/sluice/bucket"
)

// HashLen is the length of Set.Hash: 16 hex digits, the first 8 bytes of
// the SHA-256 of the set's canonical form.
const HashLen = 16

// Hash returns a short digest of what the set decides: AllowInline and,
// in name order, each policy's name, algorithm, limit, period, burst,
// failure mode, grant mode and max_ttl (when given). Two sets with the same Hash decide every
// check alike; a comment, the order of the policies or a default written
// out (a token bucket's burst equal to its limit, a period given to a
// concurrency limit) does not change it. Nodes gossip it to tell that they
// run the same policies.
func (s *Set) Hash() string {
	h := sha256.New()
	var b []byte
	if s.AllowInline {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, name := range s.Names() {
		p := s.policies[name]
		l := p.Limit
		switch {
		case l.Algorithm == bucket.Concurrency:
			l.Period, l.Burst = 0, 0
		case l.Algorithm != bucket.TokenBucket:
			l.Burst = 0
		case l.Burst == 0:
			l.Burst = l.Limit
		}
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		b = append(b, byte(l.Algorithm), byte(p.FailureMode), byte(p.Grants))
		b = binary.AppendVarint(b, l.Limit)
		b = binary.AppendVarint(b, int64(l.Period))
		b = binary.AppendVarint(b, l.Burst)
		if l.Calendar != bucket.NoCalendar { // only then, as for max_ttl
			b = append(b, 'c', byte(l.Calendar))
			b = append(b, l.Zone.String()...) // nil is "UTC"
			b = append(b, 0)
		}
		if p.MaxTTL != 0 { // only then, so that sets without one keep their hash
			b = append(b, 't')
			b = binary.AppendVarint(b, int64(p.MaxTTL))
		}
		h.Write(b)
		b = b[:0]
	}
	h.Write(b)
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:HashLen/2])
}
