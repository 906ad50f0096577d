package cluster_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every Cluster
// is shut down and every Run has returned.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
