package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/client"
)

// TestPrintMembersPolicyMismatch: the table marks the members whose policy
// hash differs from the answering node's, not those without one (older
// versions), and says how many differ.
func TestPrintMembersPolicyMismatch(t *testing.T) {
	ms := []client.Member{
		{Name: "n1", PolicyHash: "aaaaaaaaaaaaaaaa"},
		{Name: "n2", PolicyHash: "bbbbbbbbbbbbbbbb"},
		{Name: "n3", PolicyHash: "aaaaaaaaaaaaaaaa"},
		{Name: "old"},
	}
	mismatch := policyMismatch("n1", ms)
	if !slices.Equal(mismatch, []string{"n2"}) {
		t.Fatalf("mismatch %v, want [n2]", mismatch)
	}
	var b bytes.Buffer
	if err := printMembers(&b, "n1", ms, mismatch); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 6 || !strings.HasSuffix(lines[0], "POLICY") {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, want := range []string{"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb != n1", "aaaaaaaaaaaaaaaa", "-"} {
		if !strings.HasSuffix(lines[i+1], want) {
			t.Errorf("line %q does not end with %q", lines[i+1], want)
		}
	}
	if !strings.Contains(lines[5], "policy mismatch: 1 of 4 members") || !strings.Contains(lines[5], "n2") {
		t.Errorf("summary %q", lines[5])
	}

	// All alike, or an answering node without a hash: no mismatch.
	if got := policyMismatch("n1", ms[:1]); got != nil {
		t.Errorf("mismatch %v for one member", got)
	}
	if got := policyMismatch("old", ms); got != nil {
		t.Errorf("mismatch %v against a node without a hash", got)
	}
}
