package grant

import (
	"context"
	"testing"
	"time"
)

// BenchmarkUseFromGrant is the hot path: a check answered from a held
// grant, refilled in the background. (go test -bench UseFromGrant
// ./internal/grant/)
func BenchmarkUseFromGrant(b *testing.B) {
	o := &owner{tokens: 1 << 62}
	ask := o.ask
	h := NewHolder(Config{Refill: time.Hour})
	defer h.Close()
	now := int64(1_700_000_000) * int64(time.Second)
	clock := func() int64 { return now }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := h.Use(ctx, 1, now, 1, 1<<40, 1<<20, true, ask, clock); !ok {
			b.Fatal("not answered")
		}
	}
}

// BenchmarkUseFromReturnableGrant is BenchmarkUseFromGrant with grants
// that can be returned, whose unspent tokens are kept per grant.
func BenchmarkUseFromReturnableGrant(b *testing.B) {
	o := &issuer{name: "a", tokens: 1 << 62}
	ask := o.ask
	h := NewHolder(Config{Refill: time.Hour})
	defer h.Close()
	now := int64(1_700_000_000) * int64(time.Second)
	clock := func() int64 { return now }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := h.Use(ctx, 1, now, 1, 1<<40, 1<<20, true, ask, clock); !ok {
			b.Fatal("not answered")
		}
	}
}
