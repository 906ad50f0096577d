package middleware_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/client/middleware"
)

// The Go snippets of README.md and docs/ are the regions of this file
// between "// snippet NAME" and "// end NAME", one tab less indented; a
// doc shows one after a line <!-- snippet NAME: client/middleware/docsnippets_test.go -->.
// TestDocSnippets checks that each doc's block equals its region, and the
// functions here run them against a real node.

// docMiddleware is README's middleware: two inline limits (the quickstart
// node has no policy file), served on a port of the service's own.
func docMiddleware(addr string, mux http.Handler) (*http.Server, *client.Client) {
	// snippet middleware
	c, err := client.New(client.Config{Addrs: []string{addr}}) // addr: "127.0.0.1:8081", make run's node
	if err != nil {
		log.Fatal(err)
	}
	ip, err := middleware.ClientIP(middleware.ClientIPConfig{TrustedProxies: []string{"10.0.0.0/8"}})
	if err != nil {
		log.Fatal(err)
	}
	limit, err := middleware.NewHTTP(middleware.HTTPConfig{
		Client:   c,
		FailMode: middleware.FailOpen, // Sluice unreachable: serve, and log each request let through
		Rules: []middleware.HTTPRule{
			{Name: "ip", Key: ip, Limit: client.Limit{Limit: 100, Period: time.Minute}},
			{Name: "api-key", Key: middleware.Header("X-API-Key"), Limit: client.Limit{Limit: 2, Period: time.Minute}},
		},
	})
	if err != nil {
		log.Fatal(err) // a rule without a key or a limit, no FailMode
	}
	srv := &http.Server{Addr: "127.0.0.1:9090", Handler: limit(mux)} // your service's port, not Sluice's
	// end middleware
	return srv, c
}

// The README's middleware, as the README shows it: two requests a minute
// per API key, the third denied.
func Example_readmeMiddleware() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	srv, c := docMiddleware(sluiceAddr(), mux)
	defer c.Close()
	for range 3 {
		r := httptest.NewRequest("GET", "/hello", nil)
		r.Header.Set("X-API-Key", "readme-key")
		w := httptest.NewRecorder()
		srv.Handler.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "api-key";r=1;t=30
	// 200 "api-key";r=0;t=60
	// 429 "api-key";r=0;t=60
}

// docCheck is docs/api.md's check through the Go client.
func docCheck(ctx context.Context, c *client.Client) error {
	// snippet check
	res, err := c.Check(ctx, client.Item{Key: "user:42", Limit: client.Limit{Limit: 1, Period: time.Hour}})
	if err != nil {
		return err // Sluice could not decide: serve or refuse, your choice
	}
	if !res[0].Allowed {
		return fmt.Errorf("429 Too Many Requests, Retry-After: %s", res[0].RetryAfter.Round(time.Second))
	}
	// end check
	return nil
}

func Example_docsCheck() {
	c, err := client.New(client.Config{Addrs: []string{sluiceAddr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	fmt.Println(docCheck(context.Background(), c))
	fmt.Println(docCheck(context.Background(), c))
	// Output:
	// <nil>
	// 429 Too Many Requests, Retry-After: 1h0m0s
}

// docLLM is docs/api.md's LLM gateway: tokens per minute and per month
// on one call, reserved before the model is called and settled with the
// response's token count.
func docLLM(ctx context.Context, c *client.Client, tenant string, estimate int64, callModel func(context.Context) (int64, error)) error {
	// snippet llm
	r, err := c.Reserve(ctx, 2*time.Minute,
		client.ReserveItem{Key: tenant, Limit: client.Limit{Limit: 10_000, Period: time.Minute}, Estimate: estimate},
		client.ReserveItem{Key: tenant, Limit: client.Limit{Limit: 1_000_000, Calendar: client.Month, Timezone: "Europe/Berlin"}, Estimate: estimate},
	)
	if err != nil {
		return err // Sluice could not decide: serve or refuse, your choice
	}
	if !r.Allowed { // nothing stays reserved
		for _, it := range r.Items {
			if it.RetryAfter > 0 {
				return fmt.Errorf("429 Too Many Requests, Retry-After: %s", it.RetryAfter.Round(time.Second))
			}
		}
		return fmt.Errorf("429 Too Many Requests")
	}
	used, err := callModel(ctx) // the response's usage.total_tokens
	if err != nil {
		used = 0 // nothing was generated: refund the estimate
	}
	if _, err := c.Settle(ctx, r, used); err != nil {
		return err // unsettled, each reservation settles at its estimate after 2m
	}
	// end llm
	return nil
}

func Example_docsLLM() {
	c, err := client.New(client.Config{Addrs: []string{sluiceAddr()}})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	model := func(context.Context) (int64, error) { return 1_500, nil }
	fmt.Println(docLLM(ctx, c, "tenant:llm", 4_000, model)) // settles 1,500 of 4,000
	fmt.Println(docLLM(ctx, c, "tenant:llm", 8_000, model)) // 8,500 left this minute
	fmt.Println(docLLM(ctx, c, "tenant:llm", 9_000, model)) // 7,000 left: denied
	// Output:
	// <nil>
	// <nil>
	// 429 Too Many Requests, Retry-After: 12s
}

// docGrants is docs/cluster.md's client holding grants.
func docGrants(addrs []string) (*client.Client, error) {
	// snippet grants
	c, err := client.New(client.Config{Addrs: addrs, Grants: &client.GrantOptions{}})
	// end grants
	return c, err
}

// docTracing is docs/metrics.md's traced client.
func docTracing(addrs []string, tp trace.TracerProvider) client.Config {
	// snippet tracing
	cfg := client.Config{Addrs: addrs, DialOptions: []grpc.DialOption{grpc.WithStatsHandler(
		otelgrpc.NewClientHandler(otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{})))}}
	// end tracing
	return cfg
}

// The clients of docs/cluster.md and docs/metrics.md are made and answer.
func TestDocClients(t *testing.T) {
	c, err := docGrants([]string{sluiceAddr()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc, err := client.New(docTracing([]string{sluiceAddr()}, noop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	for _, c := range []*client.Client{c, tc} {
		if _, err := c.Check(context.Background(), client.Item{Key: "doc-clients", Limit: client.Limit{Limit: 5, Period: time.Minute}}); err != nil {
			t.Fatal(err)
		}
	}
}

// snippets returns this file's regions by name.
func snippets(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("docsnippets_test.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	re := regexp.MustCompile(`(?s)\n\t// snippet (\w+)\n(.*?)\t// end \w+\n`)
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		var lines []string
		for _, l := range strings.Split(strings.TrimSuffix(m[2], "\n"), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "\t"))
		}
		out[m[1]] = strings.Join(lines, "\n") + "\n"
	}
	return out
}

// Every Go block of README.md and docs/*.md is one of this file's
// snippets, shown verbatim after its marker line.
func TestDocSnippets(t *testing.T) {
	want := snippets(t)
	for _, name := range []string{"middleware", "check", "grants", "tracing", "llm"} {
		if want[name] == "" {
			t.Fatalf("docsnippets_test.go has no snippet %q", name)
		}
	}
	docs := []string{"../../README.md"}
	more, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, more...)
	marker := regexp.MustCompile(`<!-- snippet (\w+): client/middleware/docsnippets_test.go -->\n` + "```go\n")
	used := map[string]bool{}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if n, m := strings.Count(s, "```go\n"), len(marker.FindAllStringIndex(s, -1)); n != m {
			t.Errorf("%s: %d Go blocks, %d after a snippet marker: every Go block is a tested snippet", doc, n, m)
		}
		for _, loc := range marker.FindAllStringSubmatchIndex(s, -1) {
			name := s[loc[2]:loc[3]]
			block, _, _ := strings.Cut(s[loc[1]:], "```")
			used[name] = true
			if block != want[name] {
				t.Errorf("%s: snippet %s differs from docsnippets_test.go's:\n%s\nwant:\n%s", doc, name, block, want[name])
			}
		}
	}
	for name := range want {
		if !used[name] {
			t.Errorf("snippet %s is shown by no doc", name)
		}
	}
}
