package api

// The status page: GET /ui (HTML) and GET /ui/data (the same as JSON).
//
// It shows the members as this node sees them (state, ring share), the
// state of its configurations (policies, RLS config: source, hash, rules,
// last load and its result), the
// rate of checks and denials this node answered over the last minutes
// (activity.Series), and its hot keys (activity.HotKeys, a Space-Saving
// sketch fed a sample of the checks). Both routes take these query
// parameters; anything else is a 400 naming it:
//
//	top=N          hot keys to list, 1..the sketch's counters (default 20)
//	window=D       the span of the rates, a Go duration from one interval
//	               to the whole ring (default: the whole ring, 5m)
//	refresh=S      /ui only: seconds between reloads (meta refresh),
//	               0..3600, 0 for none (default 5)
//
// Keys may be sensitive (user ids, tokens, addresses). UIConfig.Keys says
// who sees them: KeysLocal (the default) shows them to requests from a
// loopback address that carry no proxy header (Forwarded, X-Forwarded-For,
// X-Real-IP), KeysAlways to everyone who reaches the port, KeysNever to
// no one; a hidden key is shown as its 64-bit bucket hash. The page has no
// script (Content-Security-Policy: script-src 'none') and loads nothing
// from elsewhere; its template and style are embedded in the binary.

import (
	"embed"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-rl/sluice/internal/activity"
)

// KeyDisplay says to whom the status page shows hot keys' strings.
type KeyDisplay int

const (
	// KeysLocal shows keys to requests from loopback without proxy headers.
	KeysLocal KeyDisplay = iota
	// KeysAlways shows keys to every request.
	KeysAlways
	// KeysNever shows only hashes.
	KeysNever
)

// ParseKeyDisplay parses "local", "always" or "never".
func ParseKeyDisplay(s string) (KeyDisplay, error) {
	switch s {
	case "local":
		return KeysLocal, nil
	case "always":
		return KeysAlways, nil
	case "never":
		return KeysNever, nil
	}
	return 0, fmt.Errorf("%q: want local, always or never", s)
}

func (k KeyDisplay) String() string {
	switch k {
	case KeysLocal:
		return "local"
	case KeysAlways:
		return "always"
	case KeysNever:
		return "never"
	}
	return "KeyDisplay(" + strconv.Itoa(int(k)) + ")"
}

// UIConfig configures the status page (HTTPConfig.UI).
type UIConfig struct {
	// Self is this node's name; required.
	Self string
	// Members lists the members with their ring shares; required.
	Members MembersFunc
	// Activity holds the rates and hot keys; required.
	Activity *activity.Recorder
	// Keys says who sees keys' strings (default KeysLocal).
	Keys KeyDisplay
	// Insecure shows a banner: the node runs its cluster without
	// authentication (`sluice serve --insecure`).
	Insecure bool
	// Configs, if set, returns the state of the node's reloaded
	// configurations (ui_config.go); nil shows none.
	Configs func() []ConfigState
}

func (c *UIConfig) validate() error {
	switch {
	case c.Self == "":
		return fmt.Errorf("%w: UIConfig.Self: is required", ErrInvalidConfig)
	case c.Members == nil:
		return fmt.Errorf("%w: UIConfig.Members: is required", ErrInvalidConfig)
	case c.Activity == nil:
		return fmt.Errorf("%w: UIConfig.Activity: is required", ErrInvalidConfig)
	case c.Keys < KeysLocal || c.Keys > KeysNever:
		return fmt.Errorf("%w: UIConfig.Keys: %d is not a KeyDisplay", ErrInvalidConfig, c.Keys)
	}
	return nil
}

//go:embed ui/page.html
var uiFS embed.FS

var uiPage = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"pct":    func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	"rate":   func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"mul100": func(f float64) float64 { return 100 * f },
	"inc":    func(i int) int { return i + 1 },
}).ParseFS(uiFS, "ui/page.html"))

// Defaults and bounds of the query parameters.
const (
	uiDefaultTop     = 20
	uiDefaultRefresh = 5
	uiMaxRefresh     = 3600
)

var (
	uiPageParams = []string{"top", "window", "refresh"}
	uiDataParams = []string{"top", "window"}
)

// uiQuery is a parsed query string of /ui or /ui/data.
type uiQuery struct {
	top     int
	slots   int // intervals of the window
	refresh int
}

// parseUIQuery parses raw, allowing the parameters of allowed.
func (c *UIConfig) parseUIQuery(raw string, allowed []string) (uiQuery, *httpError) {
	q, herr := parseQuery(raw)
	if _, ok := q[""]; ok && herr == nil {
		herr = badRequest("query", "a parameter has no name")
	}
	if herr == nil {
		herr = onlyParams(q, allowed)
	}
	if herr != nil {
		return uiQuery{}, herr
	}
	act := c.Activity
	out := uiQuery{top: min(uiDefaultTop, act.Hot.Capacity()), slots: act.Series.Slots(), refresh: uiDefaultRefresh}
	if s := q.Get("top"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > act.Hot.Capacity() {
			return uiQuery{}, badRequest("top", fmt.Sprintf("%s: want an integer from 1 to %d", quoteShort(s), act.Hot.Capacity()))
		}
		out.top = n
	}
	if s := q.Get("window"); s != "" {
		d, err := time.ParseDuration(s)
		most := time.Duration(act.Series.Slots()) * act.Interval
		if err != nil || d < act.Interval || d > most {
			return uiQuery{}, badRequest("window", fmt.Sprintf("%s: want a duration from %s to %s", quoteShort(s), act.Interval, most))
		}
		out.slots = int(d / act.Interval)
	}
	if s := q.Get("refresh"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > uiMaxRefresh {
			return uiQuery{}, badRequest("refresh", fmt.Sprintf("%s: want seconds from 0 (none) to %d", quoteShort(s), uiMaxRefresh))
		}
		out.refresh = n
	}
	return out, nil
}

// serveUI answers /ui and /ui/data.
func (a *httpAPI) serveUI(w http.ResponseWriter, r *http.Request) {
	if a.ui == nil {
		writeError(w, &httpError{status: http.StatusNotFound, msg: "the status page is not enabled"})
		return
	}
	if !allowMethods(w, r, http.MethodGet, http.MethodHead) {
		return
	}
	params := uiPageParams
	if r.URL.Path == "/ui/data" {
		params = uiDataParams
	}
	q, herr := a.ui.parseUIQuery(r.URL.RawQuery, params)
	if herr != nil {
		writeError(w, herr)
		return
	}
	data := a.ui.view(q, a.ui.showKeys(r))
	if r.URL.Path == "/ui/data" {
		writeJSON(w, http.StatusOK, data)
		return
	}
	buf := getBuffer()
	defer putBuffer(buf)
	if err := uiPage.Execute(buf, struct {
		*uiData
		Refresh int
	}{data, q.refresh}); err != nil {
		a.log.Error("rendering /ui", "err", err)
		writeError(w, &httpError{status: http.StatusInternalServerError, msg: "internal error: rendering the page failed"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// showKeys reports whether r may see keys' strings (see KeyDisplay).
func (c *UIConfig) showKeys(r *http.Request) bool {
	switch c.Keys {
	case KeysAlways:
		return true
	case KeysNever:
		return false
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip"} {
		if _, ok := r.Header[h]; ok {
			return false // through a proxy: the client may be anywhere
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
