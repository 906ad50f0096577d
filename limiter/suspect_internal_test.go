package limiter

import (
	"errors"
	"testing"
)

// suspected is nil for every name with no suspect, and the error of a
// suspect (wrapping ErrSuspect, ErrPeerUnavailable and ErrNotSent) for
// one.
func TestSuspected(t *testing.T) {
	l := &Limiter{}
	if err := l.suspected("n1"); err != nil {
		t.Fatalf("suspected with none = %v", err)
	}
	l.SetSuspects([]string{"n1"})
	err := l.suspected("n1")
	for _, want := range []error{ErrSuspect, ErrPeerUnavailable, ErrNotSent} {
		if !errors.Is(err, want) {
			t.Errorf("suspected(n1) = %v, does not wrap %v", err, want)
		}
	}
	if err := l.suspected("n2"); err != nil {
		t.Errorf("suspected(n2) = %v, want nil", err)
	}
	l.SetSuspects([]string{})
	if l.suspects.Load() != nil || l.suspected("n1") != nil {
		t.Error("SetSuspects(empty) left a set")
	}
}

// BenchmarkSuspected is the lookup every forwarded call makes, with no
// member suspect (one atomic load) and with one suspect (a map lookup).
func BenchmarkSuspected(b *testing.B) {
	for _, sus := range [][]string{nil, {"n7"}} {
		b.Run(map[bool]string{false: "none", true: "one"}[sus != nil], func(b *testing.B) {
			l := &Limiter{}
			l.SetSuspects(sus)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if l.suspected("n3") != nil {
						b.Fatal("n3 suspect")
					}
				}
			})
		})
	}
}
