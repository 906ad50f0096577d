package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// chromium returns the path of Debian's chromium. Without it the test is
// skipped, unless SLUICE_REQUIRE_CHROMIUM is set (CI: .ci/run installs it
// with tools/install-chromium.sh), which makes it a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SLUICE_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed and SLUICE_REQUIRE_CHROMIUM is set (tools/install-chromium.sh installs it)")
	}
	t.Skip("chromium is not installed (tools/install-chromium.sh installs it; SLUICE_REQUIRE_CHROMIUM=1 makes this a failure)")
	return ""
}

// uiSeen is what a person sees on the status page: the rendered text of
// its tables and figures, and of the chart's axes.
type uiSeen struct {
	Members [][]string `json:"members"` // name, state, share, address, version, policies, RLS config
	Total   string     `json:"total"`
	Configs [][]string `json:"configs"` // configuration, source, hash, rules, last load, result
	Checks  string     `json:"checks"`
	Denials string     `json:"denials"`
	HotKeys [][]string `json:"hotKeys"` // rank, key, policy, estimate, error, share
	Axes    uiAxes     `json:"axes"`
}

// uiAxes is the chart's axes as drawn: the axis lines and the labels
// with a rendered size (an SVG text outside the chart's viewBox, or
// empty, has none).
type uiAxes struct {
	Lines  int      `json:"lines"`
	YTitle string   `json:"yTitle"`
	XTitle string   `json:"xTitle"`
	YTicks []string `json:"yTicks"`
	XTicks []string `json:"xTicks"`
}

const uiSeenJS = `(() => {
	const rows = sel => Array.from(document.querySelectorAll(sel)).map(tr => Array.from(tr.cells).map(td => td.innerText.trim()));
	const text = sel => (document.querySelector(sel) || {innerText: ""}).innerText.trim();
	const drawn = el => { const b = el.getBBox(); return b.width > 0 && b.height > 0; };
	const labels = sel => Array.from(document.querySelectorAll(sel)).filter(drawn).map(el => el.textContent.trim());
	const label = sel => labels(sel).join(" ");
	return {members: rows('#members tbody tr'), total: text('#share-total'), configs: rows('#configs tbody tr'),
		checks: text('#checks-per-second'), denials: text('#denials-per-second'), hotKeys: rows('#hotkeys tbody tr'),
		axes: {lines: document.querySelectorAll('#chart line.axis').length, yTitle: label('#chart #y-axis-title'),
			xTitle: label('#chart #x-axis-title'), yTicks: labels('#chart text.ytick'), xTicks: labels('#chart text.xtick')}};
})()`

// The status page of a real 3-node cluster, in headless Chromium, after
// checks through the routing client: the three members alive with ring
// shares summing to 100%, a non-zero checks/s, and the hot key first on
// its owner's page; n2 runs other policies and RLS rules than n0 and n1,
// so the page shows each member's hashes, "differs" beside those unlike
// its node's, and its node's configurations (source, hash, rules, load);
// the chart is drawn with its axes, their titles and tick labels.
// SLUICE_UI_SCREENSHOT=path saves a screenshot of it.
func TestStatusPageInBrowser(t *testing.T) {
	exe := chromium(t)
	tc, files := uiConfigCluster(t)
	addrs := make([]string, len(tc.nodes))
	for i, n := range tc.nodes {
		addrs[i] = n.GRPCAddr()
	}
	c, err := client.New(client.Config{Addrs: addrs, Timeout: 10 * time.Second}) // routes each check to its owner
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const hotKey = "tenant:acme/login"
	var owner string
	send := func(key string, limit int64, times int) {
		for range times {
			res, err := c.Check(ctx, client.Item{Key: key, Limit: client.Limit{Limit: limit, Period: time.Hour}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("check %s: %v %v", key, err, res)
			}
			if key == hotKey {
				owner = res[0].Owner
			}
		}
	}
	// The hot key 400 times over a limit of 100 (300 denied); 60 others
	// 3 times each, spread over the nodes.
	send(hotKey, 100, 200)
	for i := range 60 {
		send(fmt.Sprintf("user:%d", i), 1000, 3)
	}
	send(hotKey, 100, 200)
	shot := os.Getenv("SLUICE_UI_SCREENSHOT")
	if shot != "" {
		// For the picture only: some seconds of uneven traffic, so the
		// chart has more than one bar.
		for s, end := 0, time.Now().Add(8*time.Second); time.Now().Before(end); s++ {
			send(hotKey, 100, 1+(s/50)%4)
			send(fmt.Sprintf("user:%d", s%60), 1000, 1)
			time.Sleep(10 * time.Millisecond) // pacing, not waiting for a condition
		}
	}
	var page *node.Node
	for _, n := range tc.nodes {
		if n.Name() == owner {
			page = n
		}
	}
	if page == nil {
		t.Fatalf("hot key's owner %q is not a node", owner)
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.WindowSize(1100, 1300))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// The first Run starts the browser, which lives as long as the context
	// of that call: it gets no timeout; later calls do.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}

	url := "http://" + page.HTTPAddr() + "/ui?refresh=0&window=1m"
	load := func() uiSeen {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("hotkeys"))); err != nil {
			t.Fatalf("loading %s: %v", url, err)
		}
		seen, err := chromedp.Run(ctx, chromedp.Evaluate[uiSeen](uiSeenJS))
		if err != nil {
			t.Fatalf("reading %s: %v", url, err)
		}
		return seen
	}
	// The rate shows once the node's series has closed an interval (each
	// second) with checks in it: the hot key goes on being checked, on its
	// owner, until the page shows a rate, however long the browser took
	// to start on a busy machine.
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	trafficDone := make(chan struct{})
	go func() {
		defer close(trafficDone)
		for trafficCtx.Err() == nil {
			_, _ = c.Check(trafficCtx, client.Item{Key: hotKey, Limit: client.Limit{Limit: 100, Period: time.Hour}})
			time.Sleep(5 * time.Millisecond) // pacing, not waiting for a condition
		}
	}()
	var seen uiSeen
	deadline := time.Now().Add(30 * time.Second)
	for {
		if seen = load(); seen.Checks != "" && seen.Checks != "0.0" {
			break
		}
		if time.Now().After(deadline) {
			stopTraffic()
			<-trafficDone
			t.Fatalf("checks/s still %q after 30 s: %+v", seen.Checks, seen)
		}
		time.Sleep(200 * time.Millisecond) // the next closed interval
	}
	stopTraffic()
	<-trafficDone
	t.Logf("%s's page: %+v", owner, seen)

	if len(seen.Members) != 3 {
		t.Fatalf("page lists %d members, want 3: %v", len(seen.Members), seen.Members)
	}
	var total float64
	for i, m := range seen.Members {
		if want := fmt.Sprint("n", i); !strings.HasPrefix(m[0], want) || m[1] != "alive" {
			t.Errorf("member row %d: %v, want %s alive", i, m, want)
		}
		share, err := strconv.ParseFloat(strings.TrimSuffix(m[2], "%"), 64)
		if err != nil || share <= 0 {
			t.Errorf("member %s: share %q", m[0], m[2])
		}
		total += share
	}
	if total < 99.5 || total > 100.5 || seen.Total != "100.0%" {
		t.Errorf("ring shares sum to %.1f%% (total shown %q), want 100%%", total, seen.Total)
	}
	if v, err := strconv.ParseFloat(seen.Checks, 64); err != nil || v <= 0 {
		t.Errorf("checks/s %q, want > 0", seen.Checks)
	}
	if len(seen.HotKeys) == 0 || seen.HotKeys[0][1] != hotKey {
		t.Fatalf("hot keys %v, want %s first", seen.HotKeys, hotKey)
	}
	checkUIConfigs(t, seen, page, tc.nodes, files)
	checkUIAxes(t, seen.Axes)

	if path := shot; path != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
}

// uiConfigCluster is a 3-node cluster whose n2 has other policies and
// RLS rules than n0 and n1; files are each node's policy file and RLS
// config.
func uiConfigCluster(t *testing.T) (tc *testCluster, files map[string][2]string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	common := [2]string{
		write("policies.yaml", "policies:\n  login:\n    limit: 5\n    period: 1m\n"),
		write("web.yaml", "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n"),
	}
	files = map[string][2]string{"n0": common, "n1": common, "n2": {
		write("policies-n2.yaml", "policies:\n  login:\n    limit: 6\n    period: 1m\n  api:\n    limit: 100\n    period: 1s\n"),
		write("web-n2.yaml", "domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 4}\n"),
	}}
	tc = &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for _, name := range []string{"n0", "n1", "n2"} {
		tc.addWith(name, func(c *node.Config) { c.PolicyFile, c.RLSConfig = files[name][0], files[name][1] })
	}
	tc.waitConverged()
	return tc, files
}

// checkUIConfigs checks the configuration state page shows: each
// member's policy and RLS hashes, "differs" beside exactly those unlike
// page's, and page's own configurations as loaded.
func checkUIConfigs(t *testing.T, seen uiSeen, page *node.Node, nodes []*node.Node, files map[string][2]string) {
	t.Helper()
	byName := map[string]*node.Node{}
	for _, n := range nodes {
		byName[n.Name()] = n
	}
	for _, m := range seen.Members {
		n := byName[strings.Fields(m[0])[0]]
		if n == nil || len(m) != 7 {
			t.Errorf("member row %v: not one of the nodes, or not 7 cells", m)
			continue
		}
		for _, c := range []struct {
			what, cell, hash, pageHash string
		}{{"policies", m[5], n.PolicyHash(), page.PolicyHash()}, {"RLS config", m[6], n.RLSHash(), page.RLSHash()}} {
			want := c.hash
			if c.hash != c.pageHash {
				want += " differs"
			}
			if c.hash == "" || c.cell != want {
				t.Errorf("%s's %s on %s's page: %q, want %q", n.Name(), c.what, page.Name(), c.cell, want)
			}
		}
	}
	if n0, n2 := byName["n0"], byName["n2"]; n0.PolicyHash() == n2.PolicyHash() || n0.RLSHash() == n2.RLSHash() {
		t.Fatalf("n0 and n2 have the same hashes: the page can show no mismatch")
	}
	f := files[page.Name()]
	want := [][]string{{"policies", f[0], page.PolicyHash(), "1", "loaded"}, {"rls", f[1], page.RLSHash(), "1", "loaded"}}
	if page.Name() == "n2" {
		want[0][3] = "2"
	}
	if len(seen.Configs) != len(want) {
		t.Errorf("configurations on %s's page: %v, want %v", page.Name(), seen.Configs, want)
		return
	}
	for i, row := range seen.Configs {
		if len(row) != 6 || !slices.Equal([]string{row[0], row[1], row[2], row[3], row[5]}, want[i]) || row[4] == "" || row[4] == "never" {
			t.Errorf("configuration row %d on %s's page: %q, want %q with a last load", i, page.Name(), row, want[i])
		}
	}
}

// checkUIAxes checks the chart's axes: two lines, the titles, checks/s
// from 0 up on the y axis, time ago to now on the x axis.
func checkUIAxes(t *testing.T, a uiAxes) {
	t.Helper()
	if a.Lines != 2 || a.YTitle != "checks/s" || a.XTitle != "time (ago)" {
		t.Errorf("chart axes: %d lines, titles %q and %q; want 2, checks/s and time (ago)", a.Lines, a.YTitle, a.XTitle)
	}
	if len(a.YTicks) != 3 || a.YTicks[0] != "0.0" {
		t.Errorf("y axis ticks %q, want 3 from 0.0", a.YTicks)
	} else if top, err := strconv.ParseFloat(a.YTicks[2], 64); err != nil || top <= 0 {
		t.Errorf("y axis ticks %q, want the peak checks/s at the top", a.YTicks)
	}
	if want := []string{"-1m0s", "-45s", "-30s", "-15s", "now"}; !slices.Equal(a.XTicks, want) {
		t.Errorf("x axis ticks %q, want %q (window=1m)", a.XTicks, want)
	}
}
