package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/activity"
	"github.com/sluice-rl/sluice/limiter"
)

// uiServer is an HTTP API with the status page, over a limiter that feeds
// the recorder, and three members.
type uiServer struct {
	*httptest.Server
	rec *activity.Recorder
}

func newUIServer(t *testing.T, keys KeyDisplay) *uiServer {
	t.Helper()
	rec := activity.New(activity.Config{SampleEvery: 1, Slots: 60})
	lim, err := limiter.New(limiter.Config{NodeName: "n0", Activity: rec})
	if err != nil {
		t.Fatal(err)
	}
	members := func() []MemberInfo {
		return []MemberInfo{
			{Name: "n2", State: "suspect", RingShare: 0.30, GRPCAddr: "127.0.0.1:3"},
			{Name: "n0", State: "alive", RingShare: 0.36, GRPCAddr: "127.0.0.1:1", Version: "v1.2.3"},
			{Name: "n1", State: "alive", RingShare: 0.34, GRPCAddr: "127.0.0.1:2"},
		}
	}
	configs := func() []ConfigState {
		return []ConfigState{
			{Name: "policies", Source: "/etc/sluice/policies.yaml", Hash: "0123456789abcdef", Rules: 3, LastLoad: "2026-12-06T21:00:00Z", LastResult: "applied"},
			{Name: "rls", Source: "/etc/sluice/rls", Hash: "fedcba98", Rules: 7, LastLoad: "2026-12-06T21:05:00Z", LastResult: "rejected: a.yaml:3: descriptors[0].key: must not be empty"},
		}
	}
	srv := httptest.NewServer(mustHandler(t, HTTPConfig{Checker: lim,
		UI: &UIConfig{Self: "n0", Members: members, Activity: rec, Keys: keys, Configs: configs}}))
	t.Cleanup(srv.Close)
	return &uiServer{Server: srv, rec: rec}
}

// traffic sends checks: the hot key 30 times (a limit of 10: 20 denied),
// a key that needs escaping 3 times, and 5 others once, then closes the
// interval.
func (s *uiServer) traffic(t *testing.T) {
	t.Helper()
	check := func(key string, limit int) {
		body := fmt.Sprintf(`{"checks":[{"key":%q,"limit":%d,"period":"1h"}]}`, key, limit)
		a := do(t, s.Server, http.MethodPost, "/v1/check", body)
		if a.status != http.StatusOK && a.status != http.StatusTooManyRequests {
			t.Fatalf("check %s: %s", key, a)
		}
	}
	for range 30 {
		check("user:hot", 10)
	}
	for range 3 {
		check(`<script>alert("x")</script>`, 100)
	}
	for i := range 5 {
		check(fmt.Sprint("user:", i), 100)
	}
	s.rec.Series.Tick()
}

func TestUIPage(t *testing.T) {
	s := newUIServer(t, KeysLocal)
	s.traffic(t)
	a := do(t, s.Server, http.MethodGet, "/ui?refresh=0", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET /ui: %s", a)
	}
	if ct := a.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := a.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	page := string(a.body)
	for _, want := range []string{
		`<td class="name">n0 <span class="note">(this node)</span></td><td><span class="state state-alive">alive</span></td>`,
		`<td class="name">n2</td><td><span class="state state-suspect">suspect</span></td>`,
		`<span class="pct">36.0%</span>`,
		`<td id="share-total">100.0%</td>`,
		// 38 checks in one interval of 1 s; 20 denied.
		`<div class="v" id="checks-per-second">38.0</div>`,
		`<div class="v" id="denials-per-second">20.0</div>`,
		`<tr><td class="num">1</td><td class="key"><code>user:hot</code></td><td><span class="note">inline limit</span></td><td class="num">30</td><td class="num">0</td>`,
		`checks/s, last 1s</div>`,
		`<code>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;</code>`,
		`<rect class="checks"`,
		`Over the last 1m0s to twice that`,
		// The configurations' state.
		`<tr><td class="name">policies</td><td class="mono">/etc/sluice/policies.yaml</td><td class="mono hash">0123456789abcdef</td><td class="num rules">3</td><td class="mono">2026-12-06T21:00:00Z</td><td class="result">applied</td></tr>`,
		`<td class="result">rejected: a.yaml:3: descriptors[0].key: must not be empty</td>`,
		// The chart's axes: checks/s from 0 to the peak, time from the
		// window's start (1m, the ring) to now.
		`<text class="ytick" x="-7" y="120.00" dy="0.35em" text-anchor="end">0.0</text>`,
		`<text class="ytick" x="-7" y="60.00" dy="0.35em" text-anchor="end">19.0</text>`,
		`<text class="ytick" x="-7" y="0.00" dy="0.35em" text-anchor="end">38.0</text>`,
		`<text class="xtick" x="0.00" y="120" dy="1.2em" text-anchor="middle">-1m0s</text>`,
		`<text class="xtick" x="300.00" y="120" dy="1.2em" text-anchor="middle">-30s</text>`,
		`<text class="xtick" x="600.00" y="120" dy="1.2em" text-anchor="middle">now</text>`,
		`id="y-axis-title">checks/s</text>`,
		`id="x-axis-title">time (ago)</text>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "ZgotmplZ") {
		t.Errorf("page has an unescaped script or a refused value:\n%s", page)
	}
	if strings.Contains(page, `http-equiv="refresh"`) {
		t.Error("refresh=0 still refreshes")
	}
	if a := do(t, s.Server, http.MethodGet, "/ui", ""); !strings.Contains(string(a.body), `<meta http-equiv="refresh" content="5">`) {
		t.Errorf("default page does not refresh every 5 s")
	}
	// Members in name order.
	if i0, i1, i2 := strings.Index(page, ">n0"), strings.Index(page, ">n1<"), strings.Index(page, ">n2<"); !(i0 < i1 && i1 < i2) {
		t.Errorf("members not in name order: %d %d %d", i0, i1, i2)
	}
}

func TestUIData(t *testing.T) {
	s := newUIServer(t, KeysLocal)
	s.traffic(t)
	a := do(t, s.Server, http.MethodGet, "/ui/data?top=2&window=30s", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET /ui/data: %s", a)
	}
	var d uiData
	if err := json.Unmarshal(a.body, &d); err != nil {
		t.Fatal(err)
	}
	if d.Node != "n0" || len(d.Members) != 3 || d.Members[0].Name != "n0" || !d.Members[0].Self {
		t.Errorf("members: %+v", d.Members)
	}
	if d.RingShareTotal < 0.999 || d.RingShareTotal > 1.001 {
		t.Errorf("ring_share_total %v", d.RingShareTotal)
	}
	if len(d.Configs) != 2 || d.Configs[0].Name != "policies" || d.Configs[0].Hash != "0123456789abcdef" || d.Configs[1].Rules != 7 {
		t.Errorf("configs: %+v", d.Configs)
	}
	if d.Window != "30s" || d.Span != "1s" || d.NowSpan != "1s" || len(d.Rates) != 1 || d.Rates[0] != (uiRate{Checks: 38, Denials: 20}) || d.NowChecks != 38 {
		t.Errorf("rates: window %s %+v now %v", d.Window, d.Rates, d.NowChecks)
	}
	if len(d.HotKeys) != 2 || d.HotKeys[0].Key != "user:hot" || d.HotKeys[0].Estimate != 30 || !d.KeysShown ||
		d.HotKeys[0].Hash == "" || d.Counted != 38 {
		t.Errorf("hot keys: %+v (counted %d)", d.HotKeys, d.Counted)
	}
}

// Keys are shown by KeyDisplay: KeysLocal shows them to loopback without
// proxy headers only.
func TestUIKeyDisplay(t *testing.T) {
	cases := []struct {
		keys KeyDisplay
		hdr  []string
		want bool
	}{
		{KeysLocal, nil, true},
		{KeysLocal, []string{"X-Forwarded-For", "203.0.113.9"}, false},
		{KeysLocal, []string{"Forwarded", "for=203.0.113.9"}, false},
		{KeysLocal, []string{"X-Real-IP", "203.0.113.9"}, false},
		{KeysNever, nil, false},
		{KeysAlways, []string{"X-Forwarded-For", "203.0.113.9"}, true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.keys, tc.hdr), func(t *testing.T) {
			s := newUIServer(t, tc.keys)
			s.traffic(t)
			page := string(do(t, s.Server, http.MethodGet, "/ui", "", tc.hdr...).body)
			if got := strings.Contains(page, "user:hot"); got != tc.want {
				t.Errorf("key shown: %v, want %v", got, tc.want)
			}
			if !tc.want && !strings.Contains(page, `title="key hidden: bucket hash"`) {
				t.Error("hidden key not shown as its hash")
			}
		})
	}
	c := &UIConfig{Keys: KeysLocal}
	for addr, want := range map[string]bool{"127.0.0.1:80": true, "[::1]:80": true, "127.9.9.9:1": true,
		"192.0.2.1:80": false, "[2001:db8::1]:80": false, "garbage": false, "": false} {
		r := httptest.NewRequest(http.MethodGet, "/ui", nil)
		r.RemoteAddr = addr
		if got := c.showKeys(r); got != want {
			t.Errorf("showKeys from %q = %v, want %v", addr, got, want)
		}
	}
}

// Bad query parameters of /ui and /ui/data are 400s naming the parameter.
func TestUIBadInput(t *testing.T) {
	s := newUIServer(t, KeysLocal)
	cases := []struct {
		path, field string
	}{
		{"/ui/data?top=0", "top"},
		{"/ui/data?top=-1", "top"},
		{"/ui/data?top=257", "top"},
		{"/ui/data?top=ten", "top"},
		{"/ui/data?top=1&top=2", "top"},
		{"/ui/data?window=500ms", "window"},
		{"/ui/data?window=61s", "window"},
		{"/ui/data?window=-1m", "window"},
		{"/ui/data?window=soon", "window"},
		{"/ui/data?refresh=5", "refresh"}, // /ui only
		{"/ui/data?topp=3", "topp"},
		{"/ui/data?%zz", "query"},
		{"/ui/data?=1", "query"},
		{"/ui?refresh=-1", "refresh"},
		{"/ui?refresh=3601", "refresh"},
		{"/ui?refresh=1.5", "refresh"},
		{"/ui?" + strings.Repeat("x", 100) + "=1", strings.Repeat("x", 64) + "…(100 bytes)"},
	}
	for _, tc := range cases {
		a := do(t, s.Server, http.MethodGet, tc.path, "")
		var e errorJSON
		if err := json.Unmarshal(a.body, &e); err != nil || a.status != http.StatusBadRequest || e.Field != tc.field ||
			!strings.HasPrefix(e.Error, tc.field+": ") {
			t.Errorf("GET %s: %s, want 400 naming %q", tc.path, a, tc.field)
		}
	}
	for _, ok := range []string{"/ui/data?top=256&window=1m", "/ui/data?top=1&window=1s", "/ui?refresh=0&top=5&window=10s"} {
		if a := do(t, s.Server, http.MethodGet, ok, ""); a.status != http.StatusOK {
			t.Errorf("GET %s: %s", ok, a)
		}
	}
	if a := do(t, s.Server, http.MethodPost, "/ui", ""); a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui: %s", a)
	}
}

func TestUIDisabledAndConfig(t *testing.T) {
	lim, err := limiter.New(limiter.Config{NodeName: "n0"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mustHandler(t, HTTPConfig{Checker: lim}))
	defer srv.Close()
	if a := do(t, srv, http.MethodGet, "/ui", ""); a.status != http.StatusNotFound {
		t.Errorf("GET /ui without UI: %s", a)
	}
	rec := activity.New(activity.Config{})
	members := func() []MemberInfo { return nil }
	for _, tc := range []struct {
		ui    UIConfig
		field string
	}{
		{UIConfig{Members: members, Activity: rec}, "UIConfig.Self"},
		{UIConfig{Self: "n0", Activity: rec}, "UIConfig.Members"},
		{UIConfig{Self: "n0", Members: members}, "UIConfig.Activity"},
		{UIConfig{Self: "n0", Members: members, Activity: rec, Keys: 7}, "UIConfig.Keys"},
	} {
		_, err := NewHTTPHandler(HTTPConfig{Checker: lim, UI: &tc.ui})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want ErrInvalidConfig naming %s", tc.ui, err, tc.field)
		}
	}
	for _, s := range []string{"local", "always", "never"} {
		if k, err := ParseKeyDisplay(s); err != nil || k.String() != s {
			t.Errorf("ParseKeyDisplay(%q) = %v, %v", s, k, err)
		}
	}
	if _, err := ParseKeyDisplay("yes"); err == nil {
		t.Error(`ParseKeyDisplay("yes"): no error`)
	}
}

// An empty node's page renders (no members, no traffic).
func TestUIEmpty(t *testing.T) {
	rec := activity.New(activity.Config{Interval: 10 * time.Second})
	c := &UIConfig{Self: "n0", Members: func() []MemberInfo { return nil }, Activity: rec}
	q, herr := c.parseUIQuery("", uiPageParams)
	if herr != nil {
		t.Fatal(herr)
	}
	d := c.view(q, true)
	if d.Window != "50m0s" || len(d.Rates) != 0 || len(d.HotKeys) != 0 || d.NowChecks != 0 {
		t.Errorf("empty view: %+v", d)
	}
	var b strings.Builder
	if err := uiPage.Execute(&b, struct {
		*uiData
		Refresh int
	}{d, 0}); err != nil || !strings.Contains(b.String(), "no checks counted yet") {
		t.Errorf("empty page: %v\n%s", err, b.String())
	}
}

// FuzzUIQuery: any query string parses or is refused naming a field, and
// what parses is within bounds.
func FuzzUIQuery(f *testing.F) {
	for _, s := range []string{"", "top=5", "window=1m&top=64", "refresh=0", "top=0", "window=1ns", "%zz", "top=1&top=1", "="} {
		f.Add(s)
	}
	rec := activity.New(activity.Config{})
	c := &UIConfig{Self: "n0", Members: func() []MemberInfo { return nil }, Activity: rec}
	f.Fuzz(func(t *testing.T, raw string) {
		q, herr := c.parseUIQuery(raw, uiPageParams)
		if herr != nil {
			if herr.status != http.StatusBadRequest || herr.field == "" {
				t.Fatalf("%q: %+v", raw, herr)
			}
			return
		}
		if q.top < 1 || q.top > rec.Hot.Capacity() || q.slots < 1 || q.slots > rec.Series.Slots() || q.refresh < 0 || q.refresh > uiMaxRefresh {
			t.Fatalf("%q: out of bounds %+v", raw, q)
		}
	})
}

// The "now" rates average the last 10 s; the window's all of it, over the
// intervals held when the node has been up for less.
func TestUIRates(t *testing.T) {
	rec := activity.New(activity.Config{Interval: 2 * time.Second, Slots: 20})
	c := &UIConfig{Self: "n0", Members: func() []MemberInfo { return nil }, Activity: rec}
	for i := range 15 {
		if i < 10 {
			rec.Series.Add(20, 0) // 10/s
		} else {
			rec.Series.Add(200, 50) // 100/s, 25 denied/s
		}
		rec.Series.Tick()
	}
	q, herr := c.parseUIQuery("window=40s", uiDataParams)
	if herr != nil {
		t.Fatal(herr)
	}
	d := c.view(q, false)
	if d.NowSpan != "10s" || d.NowChecks != 100 || d.NowDenials != 25 {
		t.Errorf("now: %s %v %v, want 10s 100 25", d.NowSpan, d.NowChecks, d.NowDenials)
	}
	if d.Span != "30s" || d.WindowChecks != 40 || d.PeakChecks != 100 || len(d.Chart.Bars) != 15 {
		t.Errorf("window: %s %v peak %v, %d bars; want 30s 40 100, 15 bars", d.Span, d.WindowChecks, d.PeakChecks, len(d.Chart.Bars))
	}
	// The newest bar is at the right edge, full height.
	if b := d.Chart.Bars[14]; b.X != "570.00" || b.W != "30.00" || b.CheckY != "0.00" || b.CheckH != "120.00" {
		t.Errorf("newest bar %+v", b)
	}
	if q, _ := c.parseUIQuery("window=10s", uiDataParams); len(c.view(q, false).Rates) != 5 {
		t.Error("window=10s does not keep 5 intervals of 2 s")
	}
}

// An insecure node (`sluice serve --insecure`) says so in a banner and in
// /ui/data; a secure one shows no banner.
func TestUIInsecureBanner(t *testing.T) {
	s := newUIServer(t, KeysLocal)
	if a := do(t, s.Server, http.MethodGet, "/ui", ""); strings.Contains(string(a.body), `id="insecure"`) {
		t.Fatal("a secure node's page shows the insecure banner")
	}
	rec := activity.New(activity.Config{SampleEvery: 1, Slots: 60})
	lim, err := limiter.New(limiter.Config{NodeName: "n0", Activity: rec})
	if err != nil {
		t.Fatal(err)
	}
	members := func() []MemberInfo { return []MemberInfo{{Name: "n0", State: "alive", RingShare: 1}} }
	srv := httptest.NewServer(mustHandler(t, HTTPConfig{Checker: lim,
		UI: &UIConfig{Self: "n0", Members: members, Activity: rec, Insecure: true}}))
	defer srv.Close()
	if a := do(t, srv, http.MethodGet, "/ui", ""); !strings.Contains(string(a.body), `<p class="insecure" id="insecure">INSECURE:`) {
		t.Fatalf("an insecure node's page has no banner:\n%s", a.body)
	}
	if a := do(t, srv, http.MethodGet, "/ui/data", ""); !strings.Contains(string(a.body), `"insecure":true`) {
		t.Fatalf("/ui/data of an insecure node: %s", a.body)
	}
}
