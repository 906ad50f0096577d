package identity

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// The byte layouts are a wire contract between nodes and clients (and
// name stored state across upgrades): pin them.
func TestLayout(t *testing.T) {
	pol := xxhash.Sum64(append(append([]byte{1, 'p'}, "per-ip"...), append([]byte{0}, "k"...)...))
	if got := Policy(1, "per-ip", "k"); got != pol {
		t.Errorf("Policy = %x, want %x", got, pol)
	}
	head := make([]byte, 11)
	head[0], head[1] = 2, 'i'
	binary.LittleEndian.PutUint64(head[2:], uint64(time.Minute))
	inl := xxhash.Sum64(append(head, "k"...))
	if got := Inline(2, time.Minute, "k"); got != inl {
		t.Errorf("Inline = %x, want %x", got, inl)
	}
	cal := xxhash.Sum64(append([]byte{3, 'c', 4}, "Europe/Berlin\x00k"...))
	if got := Calendar(3, 4, "Europe/Berlin", "k"); got != cal {
		t.Errorf("Calendar = %x, want %x", got, cal)
	}
}

func TestDistinct(t *testing.T) {
	ids := map[uint64]string{}
	for name, id := range map[string]uint64{
		"policy a":                Policy(1, "a", "k"),
		"policy b":                Policy(1, "b", "k"),
		"policy a, alg 2":         Policy(2, "a", "k"),
		"policy a, key k2":        Policy(1, "a", "k2"),
		"inline 1s":               Inline(1, time.Second, "k"),
		"inline 1m":               Inline(1, time.Minute, "k"),
		"inline 1s, alg 3":        Inline(3, time.Second, "k"),
		"inline 0s, alg 3":        Inline(3, 0, "k"),
		"calendar day UTC":        Calendar(3, 1, "UTC", "k"),
		"calendar day Berlin":     Calendar(3, 1, "Europe/Berlin", "k"),
		"calendar month UTC":      Calendar(3, 3, "UTC", "k"),
		"calendar day UTC, alg 1": Calendar(1, 1, "UTC", "k"),
	} {
		if other, ok := ids[id]; ok {
			t.Errorf("%s and %s share identity %x", name, other, id)
		}
		ids[id] = name
	}
}
