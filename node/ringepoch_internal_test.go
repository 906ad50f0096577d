package node

import (
	"context"
	"errors"
	"testing"
	"time"
)

// ringEpoch: a wait returns once the epoch is set to at least the one
// waited for (not before), ends with its context, and the epoch never
// goes back.
func TestRingEpochWait(t *testing.T) {
	var r ringEpoch
	if err := r.wait(context.Background(), 0); err != nil {
		t.Fatalf("wait(0) = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- r.wait(context.Background(), 3) }()
	r.set(2)
	select {
	case err := <-done:
		t.Fatalf("wait(3) returned %v at epoch 2", err)
	case <-time.After(20 * time.Millisecond):
	}
	r.set(4)
	if err := <-done; err != nil || r.load() != 4 {
		t.Fatalf("wait(3) = %v at epoch %d", err, r.load())
	}
	r.set(1)
	if r.load() != 4 {
		t.Fatalf("epoch went back to %d", r.load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := r.wait(ctx, 5); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait(5) with a deadline = %v", err)
	}
}
