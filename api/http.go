package api

// The HTTP/JSON API.
//
// Routes:
//
//	POST /v1/check        {"checks":[{"key":"user:42","limit":100,"period":"1m"}, ...], "atomic": false}
//	GET|POST /v1/check?key=K&policy=P            (no body: nginx auth_request, Traefik ForwardAuth)
//	GET  /v1/usage?key=K&policy=P                (cost 0: reads without consuming; "allowed": would a check of 1 be)
//	POST /v1/reserve, /v1/settle                 (reserve an estimate, settle the actual cost: http_reserve.go)
//	GET  /healthz, /readyz, /metrics
//	GET  /ui, /ui/data                           (the status page, ui.go; when HTTPConfig.UI is set)
//	POST /json                                   (Envoy RLS ShouldRateLimit in JSON, http_rls.go; when HTTPConfig.RLS is set)
//	GET|POST /v1/admin/inspect, POST /v1/admin/reset  (an admin identity only: admin.go, admin_http.go)
//
// With HTTPConfig.RequireClientCert (mTLS), every route but the probes
// /healthz and /readyz needs a verified client certificate (http_auth.go).
//
// A check item names a policy ("policy") or carries an inline limit
// ("limit", "period", "burst", "algorithm", "failure_mode", and "calendar"
// with "timezone" instead of "period"), never both.
// "cost" defaults to 1; 0 reads. The answer is 200 when every item is
// allowed, 429 (or deny_status) when one is denied, and 503 when one could
// not be evaluated (its result carries "error"); every check or usage answer
// carries RateLimit headers describing the most restrictive item (see
// ratelimit_headers.go). Invalid input is a 400 whose JSON body names the
// field: {"error":"checks[0].limit: must be > 0","field":"checks[0].limit"}.
//
// Query-string checks take key, key_header, policy, limit, period, burst,
// algorithm, calendar, timezone, cost, failure_mode and deny_status; unknown parameters are an
// error (they are usually typos), and so is a parameter given twice. Either
// key or key_header is given, not both: key_header names a request header
// whose first comma-separated value is the key.
// deny_status (401, 403 or 429) replaces the 429 of a deny; it is also
// accepted on a JSON POST.
//
// How to put nginx (auth_request) or Traefik (ForwardAuth) in front of
// these routes is in docs/proxies.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-rl/sluice/bucket"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/store"
)

// Checker is what the HTTP API needs from the limiter. (*limiter.Limiter
// satisfies it.) Implementations must be safe for concurrent use.
type Checker interface {
	Check(ctx context.Context, reqs []limiter.Request, out []limiter.Result) ([]limiter.Result, error)
}

// HTTPConfig configures the HTTP API.
type HTTPConfig struct {
	// Checker decides checks; required.
	Checker Checker
	// Gatherer is served at /metrics; nil answers 404 there.
	Gatherer prometheus.Gatherer
	// Metrics records request latency (transport="http", method = route
	// name: check, usage, healthz, readyz, metrics, json); nil records nothing.
	Metrics *Metrics
	// Ready reports readiness for /readyz; nil means always ready.
	Ready func() bool
	// Logger receives unexpected errors; nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes bounds a request's body: a larger one is answered 413
	// with a JSON body naming "body". 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RequireClientCert answers 401 (JSON) on every path but the probes,
	// /healthz and /readyz, unless the request came over TLS with a
	// client certificate the handshake verified. Set it with a listener
	// that asks for client certificates and verifies those given
	// (tls.VerifyClientCertIfGiven): the kubelet's probes, which present
	// none, still answer, and nothing else does.
	RequireClientCert bool
	// UI, if set, serves the status page at /ui and /ui/data (ui.go);
	// nil answers 404 there.
	UI *UIConfig
	// RLS, if set, answers POST /json (http_rls.go); nil answers 404
	// there.
	RLS RateLimitServer
	// Admin, if set, answers /v1/admin/inspect and /v1/admin/reset
	// (admin_http.go); nil answers 403 there, as an Admin with no names
	// and no tokens does.
	Admin *Admin
}

// DefaultMaxBodyBytes is the default bound on a request's body.
const DefaultMaxBodyBytes = 1 << 20

// httpAPI is the handler NewHTTPHandler returns.
type httpAPI struct {
	checker Checker
	metrics http.Handler
	ready   func() bool
	log     *slog.Logger
	maxBody int64
	// requireCert: see HTTPConfig.RequireClientCert.
	requireCert bool
	ui          *UIConfig
	rls         RateLimitServer
	admin       *Admin

	obsCheck, obsUsage, obsHealthz, obsReadyz, obsMetrics, obsJSON prometheus.Observer

	checks sync.Pool // of *checkMemory
}

// NewHTTPHandler returns the HTTP API. cfg.Checker is required.
func NewHTTPHandler(cfg HTTPConfig) (http.Handler, error) {
	if cfg.Checker == nil {
		return nil, fmt.Errorf("%w: HTTPConfig.Checker: is required", ErrInvalidConfig)
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("%w: HTTPConfig.MaxBodyBytes: must be >= 0 (0: the default)", ErrInvalidConfig)
	}
	if cfg.UI != nil {
		if err := cfg.UI.validate(); err != nil {
			return nil, err
		}
	}
	a := &httpAPI{checker: cfg.Checker, ready: cfg.Ready, log: cfg.Logger, maxBody: cfg.MaxBodyBytes,
		requireCert: cfg.RequireClientCert, ui: cfg.UI, rls: cfg.RLS, admin: cfg.Admin}
	if a.maxBody == 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Gatherer != nil {
		a.metrics = promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})
	}
	if m := cfg.Metrics; m != nil {
		a.obsCheck = m.observer("http", "check")
		a.obsUsage = m.observer("http", "usage")
		a.obsHealthz = m.observer("http", "healthz")
		a.obsReadyz = m.observer("http", "readyz")
		a.obsMetrics = m.observer("http", "metrics")
		a.obsJSON = m.observer("http", "json")
	}
	return a, nil
}

// ServeHTTP routes a request. The routes are few and fixed, so a switch
// beats a mux and keeps 404 and 405 answers in JSON.
func (a *httpAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if a.requireCert && !isProbe(r.URL.Path) && !hasVerifiedClientCert(r) {
		writeError(w, errNoClientCert)
		return
	}
	var obs prometheus.Observer
	switch r.URL.Path {
	case "/v1/check":
		obs = a.obsCheck
		if allowMethods(w, r, http.MethodGet, http.MethodHead, http.MethodPost) {
			a.serveCheck(w, r)
		}
	case "/v1/usage":
		obs = a.obsUsage
		if allowMethods(w, r, http.MethodGet, http.MethodHead) {
			a.serveUsage(w, r)
		}
	case "/v1/reserve":
		if allowMethods(w, r, http.MethodPost) {
			a.serveReserve(w, r)
		}
	case "/v1/settle":
		if allowMethods(w, r, http.MethodPost) {
			a.serveSettle(w, r)
		}
	case "/healthz":
		obs = a.obsHealthz
		if allowMethods(w, r, http.MethodGet, http.MethodHead) {
			writeJSON(w, http.StatusOK, statusOK)
		}
	case "/readyz":
		obs = a.obsReadyz
		if allowMethods(w, r, http.MethodGet, http.MethodHead) {
			if a.ready == nil || a.ready() {
				writeJSON(w, http.StatusOK, statusReady)
			} else {
				writeJSON(w, http.StatusServiceUnavailable, statusNotReady)
			}
		}
	case "/metrics":
		obs = a.obsMetrics
		if a.metrics == nil {
			writeError(w, &httpError{status: http.StatusNotFound, msg: "metrics are not enabled"})
		} else if allowMethods(w, r, http.MethodGet, http.MethodHead) {
			a.metrics.ServeHTTP(w, r)
		}
	case "/ui", "/ui/data":
		a.serveUI(w, r)
	case "/json":
		obs = a.obsJSON
		if allowMethods(w, r, http.MethodPost) {
			a.serveRLSJSON(w, r)
		}
	case "/v1/admin/inspect":
		if allowMethods(w, r, http.MethodGet, http.MethodPost) {
			a.serveAdmin(w, r, false)
		}
	case "/v1/admin/reset":
		if allowMethods(w, r, http.MethodPost) {
			a.serveAdmin(w, r, true)
		}
	default:
		writeError(w, &httpError{status: http.StatusNotFound, msg: "no route " + strconv.Quote(r.URL.Path)})
	}
	if obs != nil {
		since(obs, start)
	}
}

// allowMethods answers 405 unless r's method is one of methods.
func allowMethods(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	allow := strings.Join(methods, ", ")
	w.Header().Set("Allow", allow)
	writeError(w, &httpError{status: http.StatusMethodNotAllowed,
		msg: fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow)})
	return false
}

var (
	statusOK       = json.RawMessage(`{"status":"ok"}`)
	statusReady    = json.RawMessage(`{"status":"ready"}`)
	statusNotReady = json.RawMessage(`{"status":"not ready"}`)
)

// serveCheck answers /v1/check: a JSON body of checks, or (no body) one
// check described by the query string.
func (a *httpAPI) serveCheck(w http.ResponseWriter, r *http.Request) {
	q, herr := parseQuery(r.URL.RawQuery)
	if herr != nil {
		writeError(w, herr)
		return
	}
	var body *bytes.Buffer
	if r.Method == http.MethodPost {
		if body, herr = readBody(w, r, a.maxBody); herr != nil {
			writeError(w, herr)
			return
		}
		defer putBuffer(body)
	}
	denyStatus, herr := parseDenyStatus(q)
	if herr != nil {
		writeError(w, herr)
		return
	}
	var (
		reqs   []limiter.Request
		inURL  bool
		atomic bool
	)
	m := a.checkMemory()
	defer a.releaseCheckMemory(m)
	if body != nil && len(bytes.TrimSpace(body.Bytes())) > 0 {
		if herr = onlyParams(q, checkBodyParams); herr == nil {
			reqs, atomic, herr = decodeCheckRequest(body.Bytes(), m)
		}
	} else if r.Method == http.MethodPost && len(q) == 0 {
		herr = &httpError{status: http.StatusBadRequest, field: "body",
			msg: `body: empty; send {"checks":[...]} or describe one check in the query string (key, policy, ...)`}
	} else {
		inURL = true
		reqs = make([]limiter.Request, 1)
		herr = requestFromQuery(q, r.Header, checkParams, 1, &reqs[0])
	}
	if herr != nil {
		writeError(w, herr)
		return
	}
	if client := tlsHolder(r.TLS); client != "" {
		for i := range reqs {
			reqs[i].Client = client // new keys count against its cap
		}
	}
	var results []limiter.Result
	var err error
	if atomic {
		results, err = checkAtomic(r.Context(), a.checker, reqs)
	} else {
		// The results are appended to m's (only m's own array is reused:
		// a Checker may answer with a slice of its own).
		m.results = slices.Grow(m.results, len(reqs))
		results, err = a.checker.Check(r.Context(), reqs, m.results)
	}
	if err != nil {
		writeError(w, a.checkError(err, inURL, q))
		return
	}
	status := http.StatusOK
	for i := range results {
		if results[i].Err != nil {
			status = http.StatusServiceUnavailable
			break
		}
		if !results[i].Allowed {
			status = denyStatus
		}
	}
	setRateLimitHeaders(w.Header(), results)
	out := &m.resp
	out.Results = slices.Grow(out.Results[:0], len(results))[:len(results)]
	for i := range results {
		toResultJSON(&out.Results[i], &results[i])
	}
	writeJSON(w, status, out)
}

// checkError maps an error from the Checker to an HTTP error. Validation
// errors name the field as the client wrote it: "checks[i].field" for a
// JSON body, the query parameter otherwise.
func (a *httpAPI) checkError(err error, inURL bool, q url.Values) *httpError {
	var fe *limiter.FieldError
	switch {
	case errors.As(err, &fe):
		field := fe.Field
		switch {
		case inURL:
			if field == "key" && q.Get("key") == "" && q.Get("key_header") != "" {
				field = "key_header"
			}
		case fe.Index >= 0:
			field = "checks[" + strconv.Itoa(fe.Index) + "]." + field
		case field == "items":
			field = "checks"
		}
		return badRequest(field, fe.Reason)
	case errors.Is(err, limiter.ErrInvalid), errors.Is(err, limiter.ErrUnknownPolicy), errors.Is(err, limiter.ErrInlineDisabled):
		field := "checks"
		if inURL {
			field = "query"
		}
		return badRequest(field, err.Error())
	case errors.Is(err, limiter.ErrAtomicElsewhere), errors.Is(err, errNoAtomic):
		return &httpError{status: http.StatusConflict, field: "atomic", msg: "atomic: " + err.Error()}
	case errors.Is(err, limiter.ErrPeerUnavailable):
		return &httpError{status: http.StatusServiceUnavailable, msg: err.Error()}
	case errors.Is(err, context.Canceled):
		return &httpError{status: http.StatusServiceUnavailable, msg: "request canceled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &httpError{status: http.StatusGatewayTimeout, msg: "deadline exceeded"}
	}
	a.log.Error("http: check failed", "err", err)
	return &httpError{status: http.StatusInternalServerError, msg: "internal error"}
}

// itemErrorCode names the class of a per-item error, after the gRPC code
// the gRPC API uses for it.
func itemErrorCode(err error) string {
	switch {
	case errors.Is(err, store.ErrFull):
		return "resource_exhausted"
	case errors.Is(err, bucket.ErrCostExceedsCapacity), errors.Is(err, bucket.ErrNegativeCost):
		return "invalid_argument"
	default:
		return "internal"
	}
}

// httpError is an error answer: {"error": msg, "field": field}.
type httpError struct {
	status int
	field  string // may be empty
	msg    string // the whole message, normally "field: reason"
}

func (e *httpError) Error() string { return e.msg }

// badRequest builds a 400 naming field.
func badRequest(field, reason string) *httpError {
	return &httpError{status: http.StatusBadRequest, field: field, msg: field + ": " + reason}
}

// writeError writes e as JSON.
func writeError(w http.ResponseWriter, e *httpError) {
	writeJSON(w, e.status, &errorJSON{Error: e.msg, Field: e.field})
}

// writeJSON writes v as the JSON body of a status answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := getBuffer()
	defer putBuffer(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a bug can get here: every value written is a plain struct.
		buf.Reset()
		buf.WriteString(`{"error":"internal error: encoding the answer failed"}` + "\n")
		status = http.StatusInternalServerError
	}
	// The values share one array (each a full one-element slice, so that
	// an append elsewhere copies): one allocation, not one each. The keys
	// are canonical, as Header.Set would write them.
	vals := make([]string, 4)
	vals[0], vals[1], vals[2] = "application/json", "no-store", "nosniff"
	h := w.Header()
	h["Content-Type"], h["Cache-Control"], h["X-Content-Type-Options"] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
	if buf.Len() >= autoContentLength {
		vals[3] = strconv.Itoa(buf.Len())
		h["Content-Length"] = vals[3:4:4]
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// autoContentLength is the size from which writeJSON sets Content-Length
// itself. A smaller body is written whole, and the handler returns, before
// net/http sends the header, which then adds the body's Content-Length
// (HTTP/1.1 under its 2 KiB buffer, HTTP/2 under 4 KiB; a larger body
// would be sent chunked). One header less keeps an answer with the
// RateLimit headers at 8, within the header map's first group: its growth
// and that of its clone in WriteHeader are 5 allocations a check.
const autoContentLength = 2048

// readBody reads r's body, at most limit bytes of it, into a pooled
// buffer that the caller returns with putBuffer. A larger body is a 413; a
// body still arriving when the server's read deadline passes (a slow
// client) is a 408.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) (*bytes.Buffer, *httpError) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	// A body of a declared length is read no further than it (net/http
	// and HTTP/2 hold it to the length, checked above); only one of
	// unknown length (chunked) needs MaxBytesReader, and its allocation.
	var body io.Reader = r.Body
	if r.ContentLength < 0 {
		body = http.MaxBytesReader(w, r.Body, limit)
	}
	buf := getBuffer()
	_, err := buf.ReadFrom(body)
	if err != nil {
		putBuffer(buf)
		var (
			mbe *http.MaxBytesError
			ne  net.Error
		)
		switch {
		case errors.As(err, &mbe):
			return nil, tooLarge(limit)
		case errors.As(err, &ne) && ne.Timeout():
			return nil, &httpError{status: http.StatusRequestTimeout, field: "body", msg: "body: not received in time"}
		}
		return nil, badRequest("body", "reading the body: "+err.Error())
	}
	return buf, nil
}

func tooLarge(limit int64) *httpError {
	return &httpError{status: http.StatusRequestEntityTooLarge, field: "body",
		msg: fmt.Sprintf("body: larger than %d bytes", limit)}
}

var bufferPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer { return bufferPool.Get().(*bytes.Buffer) }

func putBuffer(b *bytes.Buffer) {
	if b.Cap() > 4*DefaultMaxBodyBytes {
		return // do not pin huge buffers (a very large answer)
	}
	b.Reset()
	bufferPool.Put(b)
}
