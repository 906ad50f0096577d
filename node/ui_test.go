package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
// its tables and figures.
type uiSeen struct {
	Members [][]string `json:"members"` // name, state, share, address, version
	Total   string     `json:"total"`
	Checks  string     `json:"checks"`
	Denials string     `json:"denials"`
	HotKeys [][]string `json:"hotKeys"` // rank, key, policy, estimate, error, share
}

const uiSeenJS = `(() => {
	const rows = sel => Array.from(document.querySelectorAll(sel)).map(tr => Array.from(tr.cells).map(td => td.innerText.trim()));
	const text = sel => (document.querySelector(sel) || {innerText: ""}).innerText.trim();
	return {members: rows('#members tbody tr'), total: text('#share-total'),
		checks: text('#checks-per-second'), denials: text('#denials-per-second'), hotKeys: rows('#hotkeys tbody tr')};
})()`

// The status page of a real 3-node cluster, in headless Chromium, after
// checks through the routing client: the three members alive with ring
// shares summing to 100%, a non-zero checks/s, and the hot key first on
// its owner's page. SLUICE_UI_SCREENSHOT=path saves a screenshot of it.
func TestStatusPageInBrowser(t *testing.T) {
	exe := chromium(t)
	tc := newTestCluster(t, 3)
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
	// second): load the page until it does.
	var seen uiSeen
	deadline := time.Now().Add(30 * time.Second)
	for {
		if seen = load(); seen.Checks != "" && seen.Checks != "0.0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checks/s still %q after 30 s: %+v", seen.Checks, seen)
		}
		time.Sleep(200 * time.Millisecond) // the next closed interval
	}
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
