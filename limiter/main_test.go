package limiter_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The limiter starts goroutines (a forward per owner, background grant
// refills): none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
