package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluice-rl/sluice/node"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// rawHTTP dials n's HTTP listener and writes req as is.
func rawHTTP(t *testing.T, n *node.Node, req string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", n.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	// A bound for the whole test: a server that never closes fails it.
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn, bufio.NewReader(conn)
}

// waitClosed reads from r until the server closes the connection and
// returns how long that took.
func waitClosed(t *testing.T, r *bufio.Reader) time.Duration {
	t.Helper()
	start := time.Now()
	_, err := io.Copy(io.Discard, r)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server kept the connection open for %v", time.Since(start))
		}
		// A reset is a close too.
	}
	return time.Since(start)
}

// wantJSONError reads an answer of status from r, with a JSON error body
// naming field.
func wantJSONError(t *testing.T, r *bufio.Reader, status int, field string) {
	t.Helper()
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	var e struct{ Error, Field string }
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d", resp.StatusCode, status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Field != field || !strings.HasPrefix(e.Error, field+": ") {
		t.Fatalf("body %+v (%v), want an error naming %q", e, err, field)
	}
}

// A body sent slower than HTTPReadTimeout allows is cut off with a 408,
// and the connection closed.
func TestHTTPSlowBodyCutOff(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.Bounds.HTTPReadTimeout = 300 * time.Millisecond })
	start := time.Now()
	_, r := rawHTTP(t, n, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"checks\":")
	wantJSONError(t, r, http.StatusRequestTimeout, "body")
	waitClosed(t, r)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cut off after %v, want about 300ms", d)
	}
}

// Headers sent slower than HTTPReadHeaderTimeout: the connection is closed.
func TestHTTPSlowHeadersCutOff(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.Bounds.HTTPReadHeaderTimeout = 300 * time.Millisecond })
	_, r := rawHTTP(t, n, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
	if d := waitClosed(t, r); d > 5*time.Second {
		t.Fatalf("closed after %v, want about 300ms", d)
	}
}

// An idle keep-alive connection is closed after HTTPIdleTimeout, and not
// before a request on it was answered.
func TestHTTPIdleKeepAliveClosed(t *testing.T) {
	const idle = 400 * time.Millisecond
	n := startNode(t, func(c *node.Config) { c.Bounds.HTTPIdleTimeout = idle })
	_, r := rawHTTP(t, n, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("healthz: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	d := waitClosed(t, r)
	if d < idle/2 || d > 5*time.Second {
		t.Fatalf("idle connection closed after %v, want about %v", d, idle)
	}
}

// A body above HTTPMaxBodyBytes is a 413 with a JSON body, with a
// Content-Length or chunked.
func TestHTTPBodyLimit(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.Bounds.HTTPMaxBodyBytes = 1024 })
	body := `{"checks":[{"key":"` + strings.Repeat("k", 2000) + `","limit":1,"period":"1s"}]}`
	_, r := rawHTTP(t, n, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	wantJSONError(t, r, http.StatusRequestEntityTooLarge, "body")
	chunk := strings.Repeat("k", 600)
	_, r = rawHTTP(t, n, "POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"258\r\n"+chunk+"\r\n258\r\n"+chunk+"\r\n0\r\n\r\n")
	wantJSONError(t, r, http.StatusRequestEntityTooLarge, "body")
	// A body within the bound is answered.
	resp, err := http.Post("http://"+n.HTTPAddr()+"/v1/check", "application/json",
		strings.NewReader(`{"checks":[{"key":"k","limit":1,"period":"1s"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("small body: %d", resp.StatusCode)
	}
}

// Headers above HTTPMaxHeaderBytes (plus net/http's 4 KiB of slack) are a 431.
func TestHTTPHeaderLimit(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.Bounds.HTTPMaxHeaderBytes = 1024 })
	_, r := rawHTTP(t, n, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("h", 8<<10)+"\r\n\r\n")
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d, want 431", resp.StatusCode)
	}
}

// A gRPC message above GRPCMaxRecvBytes is refused with ResourceExhausted;
// one below is answered.
func TestGRPCMaxRecvBytes(t *testing.T) {
	n := startNode(t, func(c *node.Config) { c.Bounds.GRPCMaxRecvBytes = 64 << 10 })
	cc, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rl := sluicev1.NewRateLimiterClient(cc)
	item := func(key string) *sluicev1.CheckItem {
		return &sluicev1.CheckItem{Key: key, Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Limit: 10, Period: durationpb.New(time.Second)}}}
	}
	var items []*sluicev1.CheckItem
	for i := range 100 {
		items = append(items, item(strings.Repeat("k", 1000)+strconv.Itoa(i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rl.Check(ctx, &sluicev1.CheckRequest{Items: items}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a ~100 KB message: %v, want ResourceExhausted", err)
	}
	if _, err := rl.Check(ctx, &sluicev1.CheckRequest{Items: items[:10]}); err != nil {
		t.Fatalf("a ~10 KB message: %v", err)
	}
}

// Negative bounds are an error of New naming the field.
func TestBoundsValidated(t *testing.T) {
	for field, mutate := range map[string]func(*node.Bounds){
		"Bounds.HTTPReadTimeout":    func(b *node.Bounds) { b.HTTPReadTimeout = -1 },
		"Bounds.HTTPIdleTimeout":    func(b *node.Bounds) { b.HTTPIdleTimeout = -time.Second },
		"Bounds.HTTPMaxBodyBytes":   func(b *node.Bounds) { b.HTTPMaxBodyBytes = -1 },
		"Bounds.GRPCMaxRecvBytes":   func(b *node.Bounds) { b.GRPCMaxRecvBytes = -1 },
		"Bounds.MaxConns":           func(b *node.Bounds) { b.MaxConns = -1 },
		"Bounds.MaxStreamsPerConn":  func(b *node.Bounds) { b.MaxStreamsPerConn = -1 },
		"Bounds.MaxInflightPerConn": func(b *node.Bounds) { b.MaxInflightPerConn = -1 },
		"Bounds.MaxInflight":        func(b *node.Bounds) { b.MaxInflight = -1 },
		"Bounds.ShedMemoryShare":    func(b *node.Bounds) { b.ShedMemoryShare = 1.5 },
		"Bounds.ShedMemoryShare:":   func(b *node.Bounds) { b.ShedMemoryShare = -0.1 },
	} {
		cfg := node.LocalConfig("n1")
		mutate(&cfg.Bounds)
		n, err := node.New(cfg)
		if err == nil {
			n.Close()
			t.Fatalf("%s: New accepted it", field)
		}
		if !errors.Is(err, node.ErrInvalidConfig) || !strings.Contains(err.Error(), strings.TrimSuffix(field, ":")+":") {
			t.Errorf("%s: %v", field, err)
		}
	}
}
