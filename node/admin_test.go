package node_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/testcerts"
	"github.com/sluice-rl/sluice/node"
)

// writeAdminToken writes an admin token file in dir and returns its path
// and the token.
func writeAdminToken(t testing.TB, dir string) (path, token string) {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	token = base64.StdEncoding.EncodeToString(b)
	path = filepath.Join(dir, "admin.tokens")
	if err := os.WriteFile(path, []byte("# admin tokens\n"+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, token
}

// adminClient is a client that sends token with its admin calls.
func adminClient(t testing.TB, token string, addrs ...string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Addrs: addrs, Timeout: 10 * time.Second, DisableRouting: true, AdminToken: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var adminLimit = client.Limit{Limit: 10, Period: time.Hour}

// takeN spends n units of key one check at a time, each allowed.
func takeN(t *testing.T, c *client.Client, key string, lim client.Limit, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		res, err := c.Check(context.Background(), client.Item{Key: key, Limit: lim})
		if err != nil || res[0].Err != nil || !res[0].Allowed {
			t.Fatalf("check %d of %s: %+v %v", i, key, res, err)
		}
	}
}

// keyRemaining reads key's remaining units with a usage read.
func keyRemaining(t *testing.T, c *client.Client, key string, lim client.Limit) int64 {
	t.Helper()
	u, err := c.Usage(context.Background(), key, "", lim)
	if err != nil || u.Err != nil {
		t.Fatalf("usage %s: %+v %v", key, u, err)
	}
	return u.Remaining
}

// Over gRPC: inspect after 3 takes shows 7 of 10 and the owner; a reset
// to full lets a check see 10; a reset to 2 leaves 2.
func TestAdminInspectResetGRPC(t *testing.T) {
	path, token := writeAdminToken(t, t.TempDir())
	n := startNode(t, func(c *node.Config) { c.AdminTokenFile = path })
	c := adminClient(t, token, n.GRPCAddr())
	ctx := context.Background()
	takeN(t, c, "user:1", adminLimit, 3)
	info, err := c.Inspect(ctx, "user:1", "", adminLimit)
	if err != nil {
		t.Fatal(err)
	}
	if info.Remaining != 7 || info.Limit != 10 || info.Owner != "n1" || !info.Exists || info.Algorithm != client.TokenBucket {
		t.Fatalf("inspect after 3 takes: %+v, want 7 of 10 on n1", info)
	}
	if info.ResetAfter <= 0 || info.ResetAt.IsZero() {
		t.Fatalf("inspect: reset_after %s, reset_at %s", info.ResetAfter, info.ResetAt)
	}
	if got := keyRemaining(t, c, "user:1", adminLimit); got != 7 {
		t.Fatalf("inspect changed the key: remaining %d, want 7", got)
	}
	after, err := c.Reset(ctx, "user:1", "", adminLimit, client.ResetFull)
	if err != nil {
		t.Fatal(err)
	}
	if after.Remaining != 10 || after.Exists {
		t.Fatalf("reset to full: %+v", after)
	}
	res, err := c.Check(ctx, client.Item{Key: "user:1", Limit: adminLimit})
	if err != nil || !res[0].Allowed || res[0].Remaining != 9 {
		t.Fatalf("check after reset: %+v %v, want allowed with 9 left (10 before it)", res, err)
	}
	if after, err = c.Reset(ctx, "user:1", "", adminLimit, 2); err != nil || after.Remaining != 2 {
		t.Fatalf("reset to 2: %+v %v", after, err)
	}
	if got := keyRemaining(t, c, "user:1", adminLimit); got != 2 {
		t.Fatalf("after reset to 2: remaining %d", got)
	}
	takeN(t, c, "user:1", adminLimit, 2)
	if res, _ := c.Check(ctx, client.Item{Key: "user:1", Limit: adminLimit}); res[0].Allowed {
		t.Fatal("a third check after a reset to 2 was allowed")
	}
	// Windows and leases.
	win := client.Limit{Algorithm: client.FixedWindow, Limit: 5, Period: time.Hour}
	takeN(t, c, "user:2", win, 1)
	wi, err := c.Inspect(ctx, "user:2", "", win)
	if err != nil || wi.Remaining != 4 || wi.WindowStart.IsZero() {
		t.Fatalf("fixed window inspect: %+v %v", wi, err)
	}
	conc := client.Limit{Algorithm: client.Concurrency, Limit: 3}
	if _, err := c.Acquire(ctx, "job:1", "", conc, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	li, err := c.Inspect(ctx, "job:1", "", conc)
	if err != nil || li.LeaseCount != 1 || len(li.Leases) != 1 || li.Leases[0].Cost != 2 || li.Remaining != 1 {
		t.Fatalf("concurrency inspect: %+v %v", li, err)
	}
	if li, err = c.Reset(ctx, "job:1", "", conc, client.ResetFull); err != nil || li.LeaseCount != 0 || li.Remaining != 3 {
		t.Fatalf("concurrency reset: %+v %v", li, err)
	}
}

// httpAdmin sends an admin call over HTTP and decodes the JSON answer.
func httpAdmin(t *testing.T, hc *http.Client, scheme, addr, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, scheme+"://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %d, body %q is not JSON: %v", method, path, resp.StatusCode, b, err)
	}
	return resp.StatusCode, out
}

// The same over HTTP.
func TestAdminInspectResetHTTP(t *testing.T) {
	path, token := writeAdminToken(t, t.TempDir())
	n := startNode(t, func(c *node.Config) { c.AdminTokenFile = path })
	c := newClient(t, n.GRPCAddr())
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	takeN(t, c, "user:1", adminLimit, 3)
	item := `{"key":"user:1","limit":10,"period":"1h"}`
	code, got := httpAdmin(t, hc, "http", n.HTTPAddr(), "POST", "/v1/admin/inspect", token, item)
	if code != 200 || got["remaining"] != 7.0 || got["limit"] != 10.0 || got["owner"] != "n1" || got["used"] != 3.0 {
		t.Fatalf("inspect: %d %v", code, got)
	}
	code, got = httpAdmin(t, hc, "http", n.HTTPAddr(), "GET", "/v1/admin/inspect?key=user:1&limit=10&period=1h", token, "")
	if code != 200 || got["remaining"] != 7.0 {
		t.Fatalf("inspect GET: %d %v", code, got)
	}
	if code, got = httpAdmin(t, hc, "http", n.HTTPAddr(), "POST", "/v1/admin/reset", token, item); code != 200 || got["remaining"] != 10.0 {
		t.Fatalf("reset: %d %v", code, got)
	}
	if r := keyRemaining(t, c, "user:1", adminLimit); r != 10 {
		t.Fatalf("after reset: remaining %d, want 10", r)
	}
	code, got = httpAdmin(t, hc, "http", n.HTTPAddr(), "POST", "/v1/admin/reset", token, `{"key":"user:1","limit":10,"period":"1h","remaining":2}`)
	if code != 200 || got["remaining"] != 2.0 {
		t.Fatalf("reset to 2: %d %v", code, got)
	}
	if r := keyRemaining(t, c, "user:1", adminLimit); r != 2 {
		t.Fatalf("after reset to 2: remaining %d", r)
	}
}

// On a cluster of three, a node inspects and resets a key another node
// owns: the call goes to the owner.
func TestAdminClusterForwardsToOwner(t *testing.T) {
	path, token := writeAdminToken(t, t.TempDir())
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i := 0; i < 3; i++ {
		tc.addWith(fmt.Sprintf("n%d", i), func(c *node.Config) { c.AdminTokenFile = path })
	}
	tc.waitConverged()
	c := adminClient(t, token, tc.nodes[0].GRPCAddr())
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("user:%d", i)
		if ownerOf(t, c, k, adminLimit).Owner != "n0" {
			key = k
		}
	}
	takeN(t, c, key, adminLimit, 3)
	ctx := context.Background()
	info, err := c.Inspect(ctx, key, "", adminLimit)
	if err != nil {
		t.Fatal(err)
	}
	if info.Owner == "n0" || info.Owner == "" || info.Remaining != 7 {
		t.Fatalf("inspect through n0 of a key of another node: %+v", info)
	}
	if _, err := c.Reset(ctx, key, "", adminLimit, client.ResetFull); err != nil {
		t.Fatal(err)
	}
	for i, o := range tc.clients() {
		if r := keyRemaining(t, o, key, adminLimit); r != 10 {
			t.Fatalf("after the reset, n%d reads %d left, want 10", i, r)
		}
	}
	if info, err = c.Reset(ctx, key, "", adminLimit, 4); err != nil || info.Remaining != 4 {
		t.Fatalf("reset to 4: %+v %v", info, err)
	}
	if r := keyRemaining(t, tc.clients()[2], key, adminLimit); r != 4 {
		t.Fatalf("after a reset to 4: %d left", r)
	}
}

// Admin calls are refused without admin configuration (naming the two
// flags), without an identity, and with a wrong token; nothing is reset.
func TestAdminRefused(t *testing.T) {
	ctx := context.Background()
	bare := startNode(t, nil)
	_, err := adminClient(t, "whatever", bare.GRPCAddr()).Inspect(ctx, "k", "", adminLimit)
	if st, _ := status.FromError(errors.Unwrap(err)); st.Code() != codes.PermissionDenied ||
		!strings.Contains(st.Message(), "--admin-names") || !strings.Contains(st.Message(), "--admin-token-file") {
		t.Fatalf("no admin config: %v, want PermissionDenied naming both flags", err)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	code, got := httpAdmin(t, hc, "http", bare.HTTPAddr(), "POST", "/v1/admin/reset", "whatever", `{"key":"k","limit":10,"period":"1h"}`)
	if msg, _ := got["error"].(string); code != 403 || !strings.Contains(msg, "--admin-names") || !strings.Contains(msg, "--admin-token-file") {
		t.Fatalf("HTTP, no admin config: %d %v", code, got)
	}

	path, token := writeAdminToken(t, t.TempDir())
	n := startNode(t, func(c *node.Config) { c.AdminTokenFile = path })
	takeN(t, newClient(t, n.GRPCAddr()), "k", adminLimit, 3)
	for name, tok := range map[string]string{"no token": "", "wrong token": token[:len(token)-4] + "AAA="} {
		_, err := adminClient(t, tok, n.GRPCAddr()).Reset(ctx, "k", "", adminLimit, client.ResetFull)
		if status.Code(errors.Unwrap(err)) != codes.PermissionDenied {
			t.Errorf("gRPC %s: %v, want PermissionDenied", name, err)
		}
		if code, got := httpAdmin(t, hc, "http", n.HTTPAddr(), "POST", "/v1/admin/reset", tok, `{"key":"k","limit":10,"period":"1h"}`); code != 403 {
			t.Errorf("HTTP %s: %d %v, want 403", name, code, got)
		}
	}
	if r := keyRemaining(t, newClient(t, n.GRPCAddr()), "k", adminLimit); r != 7 {
		t.Fatalf("after refused resets: %d left, want 7", r)
	}
}

// With mTLS, a client certificate named in AdminNames is an admin; one
// that is not is refused, over gRPC and HTTP.
func TestAdminMTLSNames(t *testing.T) {
	p := newPKI(t)
	n := startNode(t, func(c *node.Config) {
		p.mtls(c)
		c.AdminNames = []string{"ops-admin"}
	})
	admin := p.public.Client(t, "ops-admin")
	adminCfg := testcerts.ClientConfig(t, p.public.PEM, &admin)
	serviceCfg := testcerts.ClientConfig(t, p.public.PEM, &p.client) // "a-service"
	ctx := context.Background()
	takeN(t, tlsClient(t, serviceCfg, n.GRPCAddr()), "k", adminLimit, 1)
	if info, err := tlsClient(t, adminCfg, n.GRPCAddr()).Inspect(ctx, "k", "", adminLimit); err != nil || info.Remaining != 9 {
		t.Fatalf("inspect as ops-admin: %+v %v", info, err)
	}
	_, err := tlsClient(t, serviceCfg, n.GRPCAddr()).Reset(ctx, "k", "", adminLimit, client.ResetFull)
	if st, _ := status.FromError(errors.Unwrap(err)); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "not an admin") {
		t.Fatalf("reset as a-service: %v, want PermissionDenied", err)
	}
	for name, cfg := range map[string]*tls.Config{"ops-admin": adminCfg, "a-service": serviceCfg} {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		code, got := httpAdmin(t, hc, "https", n.HTTPAddr(), "POST", "/v1/admin/inspect", "", `{"key":"k","limit":10,"period":"1h"}`)
		hc.CloseIdleConnections()
		if want := map[string]int{"ops-admin": 200, "a-service": 403}[name]; code != want {
			t.Errorf("HTTP inspect as %s: %d %v, want %d", name, code, got, want)
		}
	}
	if info, err := tlsClient(t, adminCfg, n.GRPCAddr()).Reset(ctx, "k", "", adminLimit, client.ResetFull); err != nil || info.Remaining != 10 {
		t.Fatalf("reset as ops-admin: %+v %v", info, err)
	}
}

// Bad input names the field: gRPC InvalidArgument, HTTP 400 JSON.
func TestAdminBadInput(t *testing.T) {
	path, token := writeAdminToken(t, t.TempDir())
	n := startNode(t, func(c *node.Config) { c.AdminTokenFile = path })
	c := adminClient(t, token, n.GRPCAddr())
	ctx := context.Background()
	for _, tc := range []struct {
		name, key, policy string
		limit             client.Limit
		remaining         int64
		field             string
	}{
		{"empty key", "", "", adminLimit, client.ResetFull, "key"},
		{"unknown policy", "k", "nope", client.Limit{}, client.ResetFull, "policy"},
		{"negative remaining", "k", "", adminLimit, -5, "remaining"},
		{"remaining above limit", "k", "", adminLimit, 11, "remaining"},
		{"concurrency remaining", "k", "", client.Limit{Algorithm: client.Concurrency, Limit: 3}, 1, "remaining"},
		{"bad limit", "k", "", client.Limit{Limit: -1, Period: time.Second}, client.ResetFull, "limit.limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Reset(ctx, tc.key, tc.policy, tc.limit, tc.remaining)
			st, _ := status.FromError(errors.Unwrap(err))
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tc.field+":") {
				t.Fatalf("err = %v, want InvalidArgument naming %q", err, tc.field)
			}
		})
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	for _, tc := range []struct{ name, body, field string }{
		{"empty key", `{"key":"","limit":10,"period":"1h"}`, "key"},
		{"unknown policy", `{"key":"k","policy":"nope"}`, "policy"},
		{"negative remaining", `{"key":"k","limit":10,"period":"1h","remaining":-1}`, "remaining"},
		{"remaining above limit", `{"key":"k","limit":10,"period":"1h","remaining":11}`, "remaining"},
		{"policy and inline", `{"key":"k","policy":"p","limit":10}`, "policy"},
		{"cost", `{"key":"k","limit":10,"period":"1h","cost":1}`, "cost"},
		{"remaining not a number", `{"key":"k","limit":10,"period":"1h","remaining":"all"}`, "remaining"},
		{"unknown field", `{"key":"k","limit":10,"period":"1h","remainder":1}`, "remainder"},
		{"malformed", `{"key":`, "body"},
	} {
		t.Run("HTTP "+tc.name, func(t *testing.T) {
			code, got := httpAdmin(t, hc, "http", n.HTTPAddr(), "POST", "/v1/admin/reset", token, tc.body)
			if code != 400 || got["field"] != tc.field {
				t.Fatalf("%d %v, want 400 naming %q", code, got, tc.field)
			}
		})
	}
	// Inspect takes no remaining.
	code, got := httpAdmin(t, hc, "http", n.HTTPAddr(), "POST", "/v1/admin/inspect", token, `{"key":"k","limit":10,"period":"1h","remaining":1}`)
	if code != 400 || got["field"] != "remaining" {
		t.Fatalf("inspect with remaining: %d %v", code, got)
	}
}

// A reset reaches the data directory: a key at 60 of 100 a day, reset to
// full, is full after a restart (its record deleted), and one reset to
// 30 keeps 30.
func TestAdminResetPersists(t *testing.T) {
	clk := newFakeClock()
	dir := filepath.Join(t.TempDir(), "data")
	path, token := writeAdminToken(t, t.TempDir())
	cfg := func(c *node.Config) {
		c.Clock = clk.Now
		c.DataDir = dir
		c.AdminTokenFile = path
	}
	n, stop := runNode(t, cfg)
	take(t, n, "plan:acme", 60)
	take(t, n, "plan:beta", 60)
	stop(false) // both written
	n, stop = runNode(t, cfg)
	c := adminClient(t, token, n.GRPCAddr())
	ctx := context.Background()
	if info, err := c.Reset(ctx, "plan:acme", "", daily, client.ResetFull); err != nil || info.Remaining != 100 {
		t.Fatalf("reset to full: %+v %v", info, err)
	}
	if info, err := c.Reset(ctx, "plan:beta", "", daily, 30); err != nil || info.Remaining != 30 {
		t.Fatalf("reset to 30: %+v %v", info, err)
	}
	stop(false)
	n, _ = runNode(t, cfg)
	if got := remaining(t, n, "plan:acme"); got != 100 {
		t.Fatalf("after a reset to full and a restart: %d of 100 left", got)
	}
	if got := remaining(t, n, "plan:beta"); got != 30 {
		t.Fatalf("after a reset to 30 and a restart: %d of 100 left", got)
	}
}

// Inspect counts a key's unsettled reservations and their estimates; a
// settled one is no longer counted.
func TestAdminInspectReservations(t *testing.T) {
	path, token := writeAdminToken(t, t.TempDir())
	n := startNode(t, func(c *node.Config) { c.AdminTokenFile = path })
	c := adminClient(t, token, n.GRPCAddr())
	ctx := context.Background()
	r, err := c.Reserve(ctx, time.Minute, client.ReserveItem{Key: "tenant:9", Limit: adminLimit, Estimate: 4})
	if err != nil || !r.Allowed {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	info, err := c.Inspect(ctx, "tenant:9", "", adminLimit)
	if err != nil || info.Reservations != 1 || info.ReservedUnits != 4 || info.Remaining != 6 || !info.Exists {
		t.Fatalf("inspect with a reservation of 4: %+v %v, want 1 reservation of 4 units, 6 left", info, err)
	}
	if _, err := c.Settle(ctx, r, 1); err != nil {
		t.Fatal(err)
	}
	if info, err = c.Inspect(ctx, "tenant:9", "", adminLimit); err != nil || info.Reservations != 0 || info.ReservedUnits != 0 || info.Remaining != 9 || info.DebtUnits != 0 {
		t.Fatalf("inspect after settling 1: %+v %v, want no unsettled reservation, 9 left", info, err)
	}
	// Settling 24 of 9 on the 9 left: 10 below empty (one burst), 5
	// forgiven; Inspect shows the debt (6 minutes a unit: no refill pays
	// any of it during the test), over gRPC and HTTP, until a Reset.
	if r, err = c.Reserve(ctx, time.Minute, client.ReserveItem{Key: "tenant:9", Limit: adminLimit, Estimate: 9}); err != nil || !r.Allowed {
		t.Fatalf("reserve 9: %+v %v", r, err)
	}
	if s, err := c.Settle(ctx, r, 24); err != nil || s[0].Charged != 10 || s[0].Forgiven != 5 {
		t.Fatalf("settle 24 of 9: %+v %v, want 10 charged into debt, 5 forgiven", s, err)
	}
	if info, err = c.Inspect(ctx, "tenant:9", "", adminLimit); err != nil || info.DebtUnits != 10 || info.Remaining != 0 || info.Reservations != 0 {
		t.Fatalf("inspect in debt: %+v %v, want 10 units of debt, none left", info, err)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	if code, got := httpAdmin(t, hc, "http", n.HTTPAddr(), "POST", "/v1/admin/inspect", token, `{"key":"tenant:9","limit":10,"period":"1h"}`); code != 200 || got["debt_units"] != 10.0 {
		t.Fatalf("HTTP inspect in debt: %d %v, want debt_units 10", code, got)
	}
	if info, err = c.Reset(ctx, "tenant:9", "", adminLimit, 10); err != nil || info.DebtUnits != 0 || info.Remaining != 10 {
		t.Fatalf("reset to full: %+v %v, want the debt gone", info, err)
	}
}
