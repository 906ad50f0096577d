package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `sluice rls` against a real node sends one ShouldRateLimit: exit 0 and
// each descriptor's status while under the limit, 1 once over it. POST
// /json on the node's HTTP port counts on the same counters.
func TestRLSCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "web.yaml")
	data := "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n  - key: path\n"
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--rls-config", file)
	resp, err := http.Post("http://"+s.http+"/json", "application/json",
		strings.NewReader(`{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /json: %s", resp.Status)
	}
	code, out := sluice(t, "rls", "--addr", s.grpc, "--domain", "web", "--descriptor", "user=ann", "--descriptor", "path=/a,user=bob", "--hits", "2")
	want := "OK\n  user=ann: OK, remaining 0 of 3 per hour, window ends in "
	if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "  path=/a,user=bob: OK (no limit)\n") {
		t.Fatalf("under the limit: exit %d, output %q; want 0, starting %q", code, out, want)
	}
	code, out = sluice(t, "rls", "--addr", s.grpc, "--domain", "web", "--descriptor", "user=ann")
	if code != 1 || !strings.HasPrefix(out, "OVER_LIMIT\n  user=ann: OVER_LIMIT, remaining 0 of 3 per hour") {
		t.Fatalf("over the limit: exit %d, output %q; want 1", code, out)
	}
	code, out = sluice(t, "rls", "--addr", s.grpc, "--domain", "web", "--descriptor", "user=cy", "--json")
	if code != 0 || !strings.HasPrefix(out, `{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":3,"unit":"HOUR"},"limitRemaining":2`) {
		t.Fatalf("--json: exit %d, output %q", code, out)
	}
}

// Bad flags and an unreachable node exit 2 naming the cause.
func TestRLSCommandBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--descriptor", "a=b"}, "--domain"},
		{[]string{"--domain", "web"}, "--descriptor"},
		{[]string{"--domain", "web", "--descriptor", "novalue"}, "descriptor"},
		{[]string{"--domain", "web", "--descriptor", "=v"}, "descriptor"},
		{[]string{"--domain", "web", "--descriptor", "a=b,"}, "descriptor"},
		{[]string{"--domain", "web", "--descriptor", "a=b", "--hits", "-1"}, "--hits"},
		{[]string{"--domain", "web", "--descriptor", "a=b", "--hits", "4294967296"}, "--hits"},
		{[]string{"--domain", "web", "--descriptor", "a=b", "--timeout", "0s"}, "--timeout"},
		{[]string{"--domain", "web", "--descriptor", "a=b", "extra"}, "unexpected arguments"},
		{[]string{"--domain", "web", "--descriptor", "a=b", "--timeout", "300ms"}, "no answer from Sluice at 127.0.0.1:1"},
	} {
		code, out := sluice(t, append([]string{"rls", "--addr", "127.0.0.1:1"}, tc.args...)...)
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, output %q; want 2 naming %q", tc.args, code, out, tc.want)
		}
	}
}
