package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/node"
)

const proxiesDoc = "../docs/proxies.md"

// nginxBlocks returns the ```nginx blocks of a Markdown file.
func nginxBlocks(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur *strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && line == "```nginx":
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

// renderRecipe fits a recipe of docs/proxies.md to the test: the sluice
// upstream is the node's HTTP address, the backend the test's, and each
// server block listens on the next of listen.
func renderRecipe(t *testing.T, recipe, sluiceAddr, backendAddr string, listen ...string) string {
	t.Helper()
	if !strings.Contains(recipe, "server 127.0.0.1:8080;") && !strings.Contains(recipe, "upstream sluice as above") {
		t.Fatalf("recipe has neither the sluice upstream nor a reference to it:\n%s", recipe)
	}
	recipe = strings.ReplaceAll(recipe, "server 127.0.0.1:8080;", "server "+sluiceAddr+";")
	recipe = strings.ReplaceAll(recipe, "http://backend", "http://"+backendAddr)
	var b strings.Builder
	for _, line := range strings.SplitAfter(recipe, "\n") {
		b.WriteString(line)
		if strings.TrimRight(line, "\n") == "server {" {
			if len(listen) == 0 {
				t.Fatalf("recipe has more server blocks than ports:\n%s", recipe)
			}
			fmt.Fprintf(&b, "    listen %s;\n", listen[0])
			listen = listen[1:]
		}
	}
	if len(listen) != 0 {
		t.Fatalf("recipe has fewer server blocks than ports:\n%s", recipe)
	}
	return b.String()
}

// nginxBinary returns nginx's path. Without nginx the test is skipped,
// unless SLUICE_REQUIRE_NGINX is set (CI sets it, after make nginx).
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if os.Getenv("SLUICE_REQUIRE_NGINX") != "" {
		t.Fatal("nginx not found and SLUICE_REQUIRE_NGINX is set: make nginx installs it")
	}
	t.Skip("nginx not found (make nginx installs it; SLUICE_REQUIRE_NGINX=1 makes this a failure)")
	return ""
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startNginx runs nginx in the foreground, as one process, with the given
// http-level config, in a temporary prefix; it returns once every listen
// address accepts connections, and stops nginx when the test ends.
func startNginx(t *testing.T, bin, httpConf string, listen ...string) {
	t.Helper()
	prefix := t.TempDir()
	conf := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr notice;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s}
`, prefix, httpConf)
	confPath := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd := exec.Command(bin, "-p", prefix, "-c", confPath, "-e", "stderr")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("nginx config:\n%s\nnginx stderr:\n%s", conf, stderr)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range listen {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				t.Fatalf("nginx exited before listening on %s:\n%s", addr, stderr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("nginx not listening on %s within 10s: %v\n%s", addr, err, stderr)
			}
			time.Sleep(10 * time.Millisecond) // poll until the deadline
		}
	}
}

// freeLoopback returns a loopback address whose port was free a moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// answer is an HTTP response as the client of nginx got it.
type answer struct {
	status int
	header http.Header
	body   string
}

func get(t *testing.T, url string) answer {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, string(b)}
}

// The nginx recipes of docs/proxies.md in a real nginx, in front of a test
// backend and a real Sluice node (policy api: 3 per hour, every request
// from 127.0.0.1 on one key): 200 while allowed, then 429 with Retry-After
// and the RateLimit headers; with the node stopped, the fail-closed recipe
// answers 500 and the fail-open one passes the request to the backend.
func TestNginxRecipes(t *testing.T) {
	bin := nginxBinary(t)
	blocks := nginxBlocks(t, proxiesDoc)
	var closedRecipe, openRecipe string
	for _, b := range blocks {
		switch {
		case strings.Contains(b, "@sluice_unavailable"):
			openRecipe = b
		case strings.Contains(b, "upstream sluice"):
			closedRecipe = b
		}
	}
	if closedRecipe == "" || openRecipe == "" {
		t.Fatalf("%s: want a fail-closed recipe (upstream sluice) and a fail-open one (@sluice_unavailable), got %d nginx blocks", proxiesDoc, len(blocks))
	}

	var backendHits atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendHits.Add(1)
		fmt.Fprintf(w, "backend: %s %s", r.Method, r.URL.Path)
	}))
	t.Cleanup(backend.Close)

	policies := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(policies, []byte("policies:\n  api:\n    limit: 3\n    period: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := node.LocalConfig("nginx-test")
	cfg.PolicyFile = policies
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stopNode := context.WithCancel(context.Background())
	nodeDone := make(chan error, 1)
	go func() { nodeDone <- n.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopNode()
			if err := <-nodeDone; err != nil {
				t.Errorf("node Run: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(10 * time.Second); !n.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("node not ready within 10s")
		}
	}

	closedAddr, openAddr := freeLoopback(t), freeLoopback(t)
	httpConf := renderRecipe(t, closedRecipe, n.HTTPAddr(), backend.Listener.Addr().String(), closedAddr) +
		renderRecipe(t, openRecipe, n.HTTPAddr(), backend.Listener.Addr().String(), openAddr)
	startNginx(t, bin, httpConf, closedAddr, openAddr)
	closedURL, openURL := "http://"+closedAddr+"/api/x", "http://"+openAddr+"/api/x"

	// Allowed: the backend answers, with the RateLimit headers.
	for i := 1; i <= 3; i++ {
		a := get(t, closedURL)
		if a.status != http.StatusOK || a.body != "backend: GET /api/x" {
			t.Fatalf("request %d: %d %q, want 200 from the backend", i, a.status, a.body)
		}
		if want := fmt.Sprintf(`"api";r=%d;`, 3-i); !strings.HasPrefix(a.header.Get("RateLimit"), want) {
			t.Errorf("request %d: RateLimit %q, want %s...", i, a.header.Get("RateLimit"), want)
		}
		if got := a.header.Get("RateLimit-Policy"); got != `"api";q=3;w=3600` {
			t.Errorf("request %d: RateLimit-Policy %q", i, got)
		}
	}
	// Denied: 429 from nginx, with Retry-After and RateLimit headers; the
	// backend sees nothing. The fail-open recipe denies as well.
	for _, url := range []string{closedURL, openURL} {
		a := get(t, url)
		if a.status != http.StatusTooManyRequests {
			t.Fatalf("%s over the limit: %d %q, want 429", url, a.status, a.body)
		}
		if ra, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || ra < 1 || ra > 3600 {
			t.Errorf("%s: Retry-After %q, want 1..3600 seconds", url, a.header.Get("Retry-After"))
		}
		if got := a.header.Get("RateLimit"); !strings.HasPrefix(got, `"api";r=0;t=`) {
			t.Errorf("%s: RateLimit %q, want \"api\";r=0;t=...", url, got)
		}
		if got := a.header.Get("RateLimit-Policy"); got != `"api";q=3;w=3600` {
			t.Errorf("%s: RateLimit-Policy %q", url, got)
		}
	}
	if h := backendHits.Load(); h != 3 {
		t.Fatalf("backend saw %d requests, want the 3 allowed", h)
	}

	// Sluice down: fail closed is a 500 and nothing reaches the backend;
	// fail open passes the request on.
	stop()
	if a := get(t, closedURL); a.status != http.StatusInternalServerError {
		t.Errorf("fail-closed with Sluice down: %d %q, want 500", a.status, a.body)
	}
	if h := backendHits.Load(); h != 3 {
		t.Errorf("fail-closed with Sluice down: the backend saw %d requests, want still 3", h)
	}
	for i := 0; i < 2; i++ {
		a := get(t, openURL)
		if a.status != http.StatusOK || a.body != "backend: GET /api/x" {
			t.Errorf("fail-open with Sluice down, request %d: %d %q, want 200 from the backend", i, a.status, a.body)
		}
	}
	if h := backendHits.Load(); h != 5 {
		t.Errorf("the backend saw %d requests, want 5 (3 allowed, 2 failed open)", h)
	}
}
