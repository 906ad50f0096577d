package main

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sluice inspect and sluice reset against a served node with an admin
// token file: 3 checks leave 7 of 10, a reset to full 10, --remaining 2
// leaves 2; without the token both are refused; bad input exits 2 naming
// the flag.
func TestInspectReset(t *testing.T) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "admin.tokens")
	if err := os.WriteFile(tokens, []byte(base64.StdEncoding.EncodeToString(b)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--admin-token-file", tokens)
	lim := []string{"--limit", "10", "--period", "1h"}
	for i := 0; i < 3; i++ {
		if code, out := sluice(t, append([]string{"check", "--addr", s.grpc, "cli:k"}, lim...)...); code != 0 {
			t.Fatalf("check %d: exit %d: %s", i, code, out)
		}
	}
	admin := func(args ...string) (int, string) {
		return sluice(t, append(append([]string{args[0], "--addr", s.grpc, "--admin-token-file", tokens}, args[1:]...), lim...)...)
	}
	if code, out := admin("inspect", "cli:k", "--json"); code != 0 || !strings.Contains(out, `"remaining":7`) || !strings.Contains(out, `"owner":"p1"`) {
		t.Fatalf("inspect: exit %d: %s", code, out)
	}
	if code, out := admin("inspect", "cli:k"); code != 0 || !strings.Contains(out, "remaining 7 of 10") {
		t.Fatalf("inspect: exit %d: %s", code, out)
	}
	if code, out := admin("reset", "cli:k"); code != 0 || !strings.Contains(out, "remaining 10 of 10") {
		t.Fatalf("reset: exit %d: %s", code, out)
	}
	if code, out := admin("reset", "cli:k", "--remaining", "2", "--json"); code != 0 || !strings.Contains(out, `"remaining":2`) {
		t.Fatalf("reset --remaining 2: exit %d: %s", code, out)
	}
	if code, out := sluice(t, append([]string{"usage", "--addr", s.grpc, "cli:k", "--json"}, lim...)...); code != 0 || !strings.Contains(out, `"remaining":2`) {
		t.Fatalf("usage after the reset: exit %d: %s", code, out)
	}
	if code, out := sluice(t, append([]string{"reset", "--addr", s.grpc, "cli:k"}, lim...)...); code != 2 || !strings.Contains(out, "PermissionDenied") {
		t.Fatalf("reset without a token: exit %d: %s", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reset", "cli:k", "--remaining", "-3"}, "--remaining"},
		{[]string{"reset", "cli:k", "--remaining", "11"}, "remaining"},
		{[]string{"inspect", ""}, "KEY"},
		{[]string{"inspect", "cli:k", "--policy", "p"}, "--limit"},
	} {
		if code, out := admin(tc.args...); code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d: %s; want 2 naming %s", tc.args, code, out, tc.want)
		}
	}
	if code, out := sluice(t, "inspect", "--addr", s.grpc, "--admin-token-file", tokens, "cli:k", "--policy", "nope"); code != 2 || !strings.Contains(out, "policy") {
		t.Errorf("unknown policy: exit %d: %s", code, out)
	}
}
