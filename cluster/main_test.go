package cluster_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every Cluster
// is shut down and every Run has returned.
//
// One goroutine of memberlist's own outlives its Shutdown: a probe in
// flight waits for its ack or its timeout (ProbeTimeout, under a second),
// then returns. A test that silenced a member's gossip (suspicion tests)
// may end during one.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}
