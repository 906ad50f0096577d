package epoch

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every Run has
// returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
