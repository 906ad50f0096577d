package wire

import (
	"testing"

	"github.com/sluice-rl/sluice/bucket"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// TestAlgorithmRoundTrip: every bucket algorithm has a wire value and back,
// and every wire value but UNSPECIFIED names one.
func TestAlgorithmRoundTrip(t *testing.T) {
	for a := bucket.TokenBucket; a <= bucket.LastAlgorithm; a++ {
		p := ToProtoAlgorithm(a)
		if p == sluicev1.Algorithm_ALGORITHM_UNSPECIFIED {
			t.Errorf("%v: no wire value", a)
		}
		if back, ok := FromProtoAlgorithm(p); !ok || back != a {
			t.Errorf("%v -> %v -> %v, %v", a, p, back, ok)
		}
	}
	for v := range sluicev1.Algorithm_name {
		if _, ok := FromProtoAlgorithm(sluicev1.Algorithm(v)); !ok && v != 0 {
			t.Errorf("wire value %d maps to no algorithm", v)
		}
	}
	if _, ok := FromProtoAlgorithm(sluicev1.Algorithm(99)); ok {
		t.Error("an unknown wire value mapped to an algorithm")
	}
}
