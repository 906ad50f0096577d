package api

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/internal/activity"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/rls"
)

// loadOpenAPI loads and validates api/openapi.yaml.
func loadOpenAPI(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("openapi.yaml")
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid OpenAPI 3: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// openAPIHandler is the real HTTP handler with every optional route on: a
// limiter with a policy, metrics, readiness, the status page and POST /json
// over an RLS whose domain web allows 1 request a minute per user.
func openAPIHandler(t *testing.T, ready *bool) http.Handler {
	t.Helper()
	set, err := policy.Parse([]byte("policies:\n  api:\n    limit: 2\n    period: 1m\n"))
	if err != nil {
		t.Fatal(err)
	}
	rec := activity.New(activity.Config{SampleEvery: 1, Slots: 60})
	lim, err := limiter.New(limiter.Config{NodeName: "n0", Activity: rec, Policies: set})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lim.Close)
	rlsSrv, err := NewRLS(RLSConfig{Checker: lim})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := rls.Parse([]rls.File{{Name: "web.yaml", Data: []byte("domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")}}, rls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rlsSrv.SetConfig(conf)
	admin, err := NewAdmin(AdminConfig{Service: lim, Tokens: func() [][]byte { return [][]byte{[]byte(openAPIAdminToken)} }})
	if err != nil {
		t.Fatal(err)
	}
	return mustHandler(t, HTTPConfig{Checker: lim, Gatherer: prometheus.NewRegistry(), RLS: rlsSrv, Admin: admin,
		Ready: func() bool { return *ready },
		UI: &UIConfig{Self: "n0", Activity: rec,
			Members: func() []MemberInfo { return []MemberInfo{{Name: "n0", State: "alive", RingShare: 1}} }}})
}

// openAPIAdminToken is the admin token of openAPIHandler's admin routes.
const openAPIAdminToken = "c2VjcmV0LWFkbWluLXRva2VuLTEyMw=="

// adminHeader carries openAPIAdminToken.
var adminHeader = http.Header{"Authorization": {"Bearer " + openAPIAdminToken}}

// TestOpenAPIDescribesHandler drives the real handler with valid and
// invalid requests; each request is validated against api/openapi.yaml
// (a valid one must pass, an invalid one the spec can tell must fail) and
// each answer (status, headers, body) must be one the spec describes.
// Every operation of the spec is exercised.
func TestOpenAPIDescribesHandler(t *testing.T) {
	doc, router := loadOpenAPI(t)
	ready := true
	h := openAPIHandler(t, &ready)
	exercised := map[string]bool{} // "METHOD /path" of the spec's operations

	for _, tc := range []struct {
		name, method, target, body string
		header                     http.Header
		status                     int
		specRejects                bool // the spec itself tells the request is bad
	}{
		{name: "check body allowed", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:1","limit":5,"period":"1m"}]}`, status: 200},
		{name: "check body policy", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:2","policy":"api"},{"key":"u:2","policy":"api","cost":2}]}`, status: 429},
		{name: "check body deny_status", method: "POST", target: "/v1/check?deny_status=403", body: `{"checks":[{"key":"u:3","policy":"api"},{"key":"u:3","policy":"api","cost":2}]}`, status: 403},
		{name: "check body unknown field", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:1","limti":5}]}`, status: 400, specRejects: true},
		{name: "check body no checks", method: "POST", target: "/v1/check", body: `{"checks":[]}`, status: 400, specRejects: true},
		{name: "check body bad period", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:1","limit":5,"period":"soon"}]}`, status: 400},
		{name: "check body bad algorithm", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:1","limit":5,"period":"1m","algorithm":"magic"}]}`, status: 400, specRejects: true},
		{name: "check body malformed", method: "POST", target: "/v1/check", body: `{"checks":`, status: 400, specRejects: true},
		{name: "check body unknown policy", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:1","policy":"nope"}]}`, status: 400},
		{name: "check body atomic denied", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"a:1","limit":5,"period":"1m"},{"key":"a:1","policy":"api","cost":2},{"key":"a:1","policy":"api"}],"atomic":true}`, status: 429},
		{name: "check body atomic allowed", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"a:2","limit":5,"period":"1m"},{"key":"a:2","policy":"api"}],"atomic":true}`, status: 200},
		{name: "check body atomic not a bool", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"a:2","policy":"api"}],"atomic":"yes"}`, status: 400, specRejects: true},
		{name: "check body calendar", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:7","limit":5,"calendar":"month","timezone":"Europe/Berlin"}]}`, status: 200},
		{name: "check body bad calendar", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:7","limit":5,"calendar":"fortnight"}]}`, status: 400, specRejects: true},
		{name: "check body bad timezone", method: "POST", target: "/v1/check", body: `{"checks":[{"key":"u:7","limit":5,"calendar":"day","timezone":"Mars/Base"}]}`, status: 400},
		{name: "check GET calendar", method: "GET", target: "/v1/check?key=u:8&limit=3&calendar=day&timezone=Asia/Kolkata&algorithm=fixed_window", status: 200},
		{name: "check empty POST query", method: "POST", target: "/v1/check?key=u:4&policy=api", status: 200},
		{name: "check GET", method: "GET", target: "/v1/check?key=u:5&limit=3&period=1s&algorithm=sliding_window", status: 200},
		{name: "check GET key_header", method: "GET", target: "/v1/check?key_header=X-User&policy=api", header: http.Header{"X-User": {"u:6"}}, status: 200},
		{name: "check GET unknown param", method: "GET", target: "/v1/check?key=u:1&policy=api&polcy=x", status: 400},
		{name: "check GET limit not a number", method: "GET", target: "/v1/check?key=u:1&limit=many&period=1s", status: 400, specRejects: true},
		{name: "check GET bad deny_status", method: "GET", target: "/v1/check?key=u:1&policy=api&deny_status=418", status: 400, specRejects: true},
		{name: "check wrong method", method: "DELETE", target: "/v1/check", status: 405, specRejects: true},
		{name: "usage", method: "GET", target: "/v1/usage?key=u:2&policy=api", status: 200},
		{name: "usage with cost", method: "GET", target: "/v1/usage?key=u:2&policy=api&cost=1", status: 400},
		{name: "usage no key", method: "GET", target: "/v1/usage?policy=api", status: 400},
		{name: "healthz", method: "GET", target: "/healthz", status: 200},
		{name: "readyz", method: "GET", target: "/readyz", status: 200},
		{name: "metrics", method: "GET", target: "/metrics", status: 200},
		{name: "ui", method: "GET", target: "/ui?top=5&window=1m&refresh=5", status: 200},
		{name: "ui bad top", method: "GET", target: "/ui?top=-1", status: 400, specRejects: true},
		{name: "ui data", method: "GET", target: "/ui/data?top=3", status: 200},
		{name: "json allowed", method: "POST", target: "/json", body: `{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"ann"}]}]}`, status: 200},
		{name: "json over limit", method: "POST", target: "/json", body: `{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"ann"}]}],"hits_addend":1}`, status: 429},
		{name: "json override", method: "POST", target: "/json", body: `{"domain":"web","descriptors":[{"entries":[{"key":"user","value":"bob"}],"limit":{"requestsPerUnit":5,"unit":"SECOND"}}]}`, status: 200},
		{name: "json wrong type", method: "POST", target: "/json", body: `{"domain":7}`, status: 400, specRejects: true},
		{name: "json unknown field", method: "POST", target: "/json", body: `{"domain":"web","descriptor":[]}`, status: 400, specRejects: true},
		{name: "json negative hits", method: "POST", target: "/json", body: `{"domain":"web","descriptors":[{"entries":[{"key":"user"}]}],"hitsAddend":-1}`, status: 400, specRejects: true},
		{name: "json malformed", method: "POST", target: "/json", body: `{"domain":`, status: 400, specRejects: true},
		{name: "json no descriptors", method: "POST", target: "/json", body: `{"domain":"web"}`, status: 400},
		{name: "json GET", method: "GET", target: "/json", status: 405, specRejects: true},
		{name: "ui data unknown param", method: "GET", target: "/ui/data?refresh=5", status: 400},
		{name: "reserve", method: "POST", target: "/v1/reserve", body: `{"items":[{"key":"r:1","limit":100,"period":"1m","estimate":60}],"ttl":"30s"}`, status: 200},
		{name: "reserve estimate above capacity", method: "POST", target: "/v1/reserve", body: `{"items":[{"key":"r:2","limit":100,"period":"1m","estimate":60},{"key":"r:2","policy":"api","estimate":3},{"key":"r:3","policy":"api","estimate":1}]}`, status: 400},
		{name: "reserve over", method: "POST", target: "/v1/reserve", body: `{"items":[{"key":"r:4","limit":100,"period":"1m","estimate":60},{"key":"r:4","limit":100,"period":"1m","estimate":60},{"key":"r:5","policy":"api","estimate":1}]}`, status: 429},
		{name: "reserve no estimate", method: "POST", target: "/v1/reserve", body: `{"items":[{"key":"r:1","limit":100,"period":"1m"}]}`, status: 400, specRejects: true},
		{name: "reserve zero estimate", method: "POST", target: "/v1/reserve", body: `{"items":[{"key":"r:1","limit":100,"period":"1m","estimate":0}]}`, status: 400, specRejects: true},
		{name: "reserve GET", method: "GET", target: "/v1/reserve", status: 405, specRejects: true},
		{name: "settle unknown", method: "POST", target: "/v1/settle", body: `{"items":[{"key":"r:1","limit":100,"period":"1m","reservation_id":"0123456789abcdef0123456789abcdef","actual":3}]}`, status: 404},
		{name: "settle malformed id", method: "POST", target: "/v1/settle", body: `{"items":[{"key":"r:1","limit":100,"period":"1m","reservation_id":"xyz","actual":3}]}`, status: 400},
		{name: "settle negative", method: "POST", target: "/v1/settle", body: `{"items":[{"key":"r:1","limit":100,"period":"1m","reservation_id":"0123456789abcdef0123456789abcdef","actual":-1}]}`, status: 400, specRejects: true},
		{name: "admin inspect GET", method: "GET", target: "/v1/admin/inspect?key=u:2&policy=api", header: adminHeader, status: 200},
		{name: "admin inspect POST", method: "POST", target: "/v1/admin/inspect", body: `{"key":"u:2","policy":"api"}`, header: adminHeader, status: 200},
		{name: "admin inspect inline", method: "POST", target: "/v1/admin/inspect", body: `{"key":"u:9","limit":5,"period":"1m","algorithm":"sliding_window"}`, header: adminHeader, status: 200},
		{name: "admin inspect no token", method: "GET", target: "/v1/admin/inspect?key=u:2&policy=api", status: 403},
		{name: "admin inspect wrong token", method: "GET", target: "/v1/admin/inspect?key=u:2&policy=api", header: http.Header{"Authorization": {"Bearer nope"}}, status: 403},
		{name: "admin inspect remaining", method: "POST", target: "/v1/admin/inspect", body: `{"key":"u:2","policy":"api","remaining":1}`, header: adminHeader, status: 400, specRejects: true},
		{name: "admin inspect unknown policy", method: "GET", target: "/v1/admin/inspect?key=u:2&policy=nope", header: adminHeader, status: 400},
		{name: "admin reset full", method: "POST", target: "/v1/admin/reset", body: `{"key":"u:2","policy":"api"}`, header: adminHeader, status: 200},
		{name: "admin reset remaining", method: "POST", target: "/v1/admin/reset", body: `{"key":"u:2","policy":"api","remaining":1}`, header: adminHeader, status: 200},
		{name: "admin reset negative", method: "POST", target: "/v1/admin/reset", body: `{"key":"u:2","policy":"api","remaining":-1}`, header: adminHeader, status: 400, specRejects: true},
		{name: "admin reset above limit", method: "POST", target: "/v1/admin/reset", body: `{"key":"u:2","policy":"api","remaining":3}`, header: adminHeader, status: 400},
		{name: "admin reset empty key", method: "POST", target: "/v1/admin/reset", body: `{"key":"","policy":"api"}`, header: adminHeader, status: 400, specRejects: true},
		{name: "admin reset unknown field", method: "POST", target: "/v1/admin/reset", body: `{"key":"u:2","policy":"api","remainder":1}`, header: adminHeader, status: 400, specRejects: true},
		{name: "admin reset GET", method: "GET", target: "/v1/admin/reset", status: 405, specRejects: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := exchangeOpenAPI(t, router, exercised, h, tc.method, tc.target, tc.body, tc.header, tc.specRejects)
			if status != tc.status {
				t.Errorf("status %d, want %d", status, tc.status)
			}
		})
	}
	ready = false
	if status := exchangeOpenAPI(t, router, exercised, h, "GET", "/readyz", "", nil, false); status != 503 {
		t.Errorf("/readyz while not ready: %d, want 503", status)
	}

	// Every operation of the spec was exercised above.
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !exercised[method+" "+path] {
				t.Errorf("the spec's %s %s is not exercised by the test", method, path)
			}
		}
	}
}

// exchangeOpenAPI sends one request to h, validating the request and the
// answer against the spec, records the spec's operation in exercised, and
// returns the answer's status.
func exchangeOpenAPI(t *testing.T, router routers.Router, exercised map[string]bool, h http.Handler, method, target, body string, header http.Header, specRejects bool) int {
	t.Helper()
	ctx := context.Background()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Host = "localhost:8080"
	for k, v := range header {
		req.Header[k] = v
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, req)

	vreq := httptest.NewRequest(method, "http://localhost:8080"+target, strings.NewReader(body))
	vreq.Header = req.Header.Clone()
	route, params, err := router.FindRoute(vreq)
	if err != nil {
		if specRejects {
			return rr.Code
		}
		t.Fatalf("%s %s: not in openapi.yaml: %v", method, target, err)
	}
	exercised[method+" "+route.Path] = true
	// The admin routes' bearer token is the handler's to check (the spec
	// only says where it goes).
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	err = openapi3filter.ValidateRequest(ctx, in)
	switch {
	case specRejects && err == nil:
		t.Errorf("openapi.yaml accepts %s %s %s, which the handler answers %d", method, target, body, rr.Code)
	case !specRejects && err != nil:
		t.Errorf("openapi.yaml refuses %s %s %s: %v", method, target, body, err)
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true}
	if strings.HasPrefix(rr.Header().Get("Content-Type"), "text/html") {
		opts.ExcludeResponseBody = true // no HTML decoder; status and headers still checked
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rr.Code,
		Header: rr.Header(), Body: io.NopCloser(bytes.NewReader(rr.Body.Bytes())), Options: opts}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		t.Errorf("%s %s: the answer %d %s does not match openapi.yaml: %v", method, target, rr.Code, rr.Body.String(), err)
	}
	return rr.Code
}

// TestOpenAPICoversRoutes fails when the handler serves a path, or a
// method on it, that api/openapi.yaml does not describe. The paths are
// the cases of the handler's route switch (httpAPI.ServeHTTP); the
// methods, what the handler's 405 answer allows there (HEAD aside: every
// GET route answers it, as the spec says).
func TestOpenAPICoversRoutes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	ready := true
	h := openAPIHandler(t, &ready)
	paths := servedPaths(t)
	if len(paths) < 5 {
		t.Fatalf("found only the routes %v in ServeHTTP", paths)
	}
	for _, p := range paths {
		item := doc.Paths.Find(p)
		if item == nil {
			t.Errorf("the handler serves %s; openapi.yaml does not describe it", p)
			continue
		}
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, httptest.NewRequest("PATCH", p, nil))
		if rr.Code != http.StatusMethodNotAllowed {
			t.Fatalf("PATCH %s: %d, want 405 with Allow", p, rr.Code)
		}
		for _, m := range strings.Split(rr.Header().Get("Allow"), ", ") {
			if m != http.MethodHead && item.GetOperation(m) == nil {
				t.Errorf("the handler serves %s %s; openapi.yaml does not describe it", m, p)
			}
		}
	}
}

// servedPaths returns the string cases of the switch on r.URL.Path in
// (*httpAPI).ServeHTTP.
func servedPaths(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "http.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	ast.Inspect(f, func(n ast.Node) bool {
		fn, ok := n.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "ServeHTTP" || fn.Recv == nil {
			return true
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if cc, ok := n.(*ast.CaseClause); ok {
				for _, e := range cc.List {
					if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if p, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(p, "/") {
							paths = append(paths, p)
						}
					}
				}
			}
			return true
		})
		return false
	})
	slices.Sort(paths)
	return paths
}
