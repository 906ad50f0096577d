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
	pol := func(m client.Member) string { return m.PolicyHash }
	mismatch := hashMismatch("n1", ms, pol)
	if !slices.Equal(mismatch, []string{"n2"}) {
		t.Fatalf("mismatch %v, want [n2]", mismatch)
	}
	var b bytes.Buffer
	if err := printMembers(&b, "n1", ms, mismatch, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 6 || !strings.HasSuffix(strings.Join(strings.Fields(lines[0]), " "), "POLICY RLS") {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, want := range []string{"aaaaaaaaaaaaaaaa -", "bbbbbbbbbbbbbbbb != n1 -", "aaaaaaaaaaaaaaaa -", "- -"} {
		if !strings.HasSuffix(strings.Join(strings.Fields(lines[i+1]), " "), want) {
			t.Errorf("line %q does not end with %q", lines[i+1], want)
		}
	}
	if !strings.Contains(lines[5], "policy mismatch: 1 of 4 members") || !strings.Contains(lines[5], "n2") {
		t.Errorf("summary %q", lines[5])
	}

	// All alike, or an answering node without a hash: no mismatch.
	if got := hashMismatch("n1", ms[:1], pol); got != nil {
		t.Errorf("mismatch %v for one member", got)
	}
	if got := hashMismatch("old", ms, pol); got != nil {
		t.Errorf("mismatch %v against a node without a hash", got)
	}
}

// TestPrintMembersRLSMismatch: the RLS column marks the members whose RLS
// configuration hash differs from the answering node's, beside an equal
// policy hash, and a line says how many differ.
func TestPrintMembersRLSMismatch(t *testing.T) {
	ms := []client.Member{
		{Name: "a", PolicyHash: "p", RLSHash: "1111111111111111"},
		{Name: "b", PolicyHash: "p", RLSHash: "1111111111111111"},
		{Name: "c", PolicyHash: "p", RLSHash: "2222222222222222"},
	}
	rlsMis := hashMismatch("a", ms, func(m client.Member) string { return m.RLSHash })
	polMis := hashMismatch("a", ms, func(m client.Member) string { return m.PolicyHash })
	if !slices.Equal(rlsMis, []string{"c"}) || polMis != nil {
		t.Fatalf("RLS mismatch %v (want [c]), policy mismatch %v (want none)", rlsMis, polMis)
	}
	var b bytes.Buffer
	if err := printMembers(&b, "a", ms, polMis, rlsMis); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	tail := func(l string) string { return strings.Join(strings.Fields(l), " ") }
	if len(lines) != 5 || !strings.HasSuffix(tail(lines[3]), "p 2222222222222222 != a") || !strings.HasSuffix(tail(lines[1]), "p 1111111111111111") {
		t.Fatalf("table:\n%s", b.String())
	}
	if !strings.HasPrefix(lines[4], "RLS config mismatch: 1 of 3 members") || !strings.HasSuffix(lines[4], ": c") {
		t.Errorf("summary %q", lines[4])
	}
}

// TestPrintMembersSuspect: the STATE column shows a suspect member as the
// node reports it, and a line after the table names the suspects; none
// is printed when every member is alive.
func TestPrintMembersSuspect(t *testing.T) {
	ms := []client.Member{
		{Name: "n1", State: "alive"},
		{Name: "n2", State: "suspect"},
		{Name: "n3", State: "alive"},
	}
	if got := suspects(ms); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("suspects %v, want [n2]", got)
	}
	var b bytes.Buffer
	if err := printMembers(&b, "n1", ms, nil, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[2], "suspect") || strings.Contains(lines[1], "suspect") {
		t.Fatalf("table:\n%s", b.String())
	}
	if want := "suspect: 1 of 3 members do not answer n1"; !strings.HasPrefix(lines[4], want) || !strings.Contains(lines[4], ": n2;") {
		t.Errorf("summary %q, want it to start with %q and name n2", lines[4], want)
	}

	b.Reset()
	if err := printMembers(&b, "n1", []client.Member{ms[0], ms[2]}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "suspect") {
		t.Errorf("a summary with no suspect:\n%s", b.String())
	}
}

// A bad --wait or --wait-timeout is refused, naming the flag, before any
// call.
func TestMembersWaitBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--wait", "-1"}, "--wait: -1"},
		{[]string{"--wait", "three"}, "-wait"},
		{[]string{"--wait", "3", "--wait-timeout", "0s"}, "--wait-timeout: 0s"},
		{[]string{"--wait-timeout", "soon"}, "-wait-timeout"},
	} {
		code, out := sluice(t, append([]string{"members", "--addr", "127.0.0.1:1"}, tc.args...)...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("members %v: exit %d, output %q; want exit 2 and %q", tc.args, code, out, tc.want)
		}
	}
}

// `sluice members --wait N` answers once the node lists N alive members,
// and fails, saying how many it lists, when it does not within
// --wait-timeout.
func TestMembersWait(t *testing.T) {
	s := startServer(t)
	if code, out := sluice(t, "members", "--addr", s.grpc, "--wait", "1"); code != 0 || !strings.Contains(out, "alive") {
		t.Fatalf("--wait 1: exit %d, output %s", code, out)
	}
	code, out := sluice(t, "members", "--addr", s.grpc, "--wait", "2", "--wait-timeout", "1s")
	if code == 0 || !strings.Contains(out, "--wait 2: p1 lists 1 alive members after 1s") {
		t.Fatalf("--wait 2 of one node: exit %d, output %s", code, out)
	}
}
