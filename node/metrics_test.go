package node_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/internal/version"
	"github.com/sluice-rl/sluice/node"
)

// scrape returns the lines of n's /metrics, fetched over HTTP, that are
// samples (no comments).
func scrape(t *testing.T, n *node.Node) []string {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// sample returns the value of the sample that starts with prefix (the name
// and, if any, labels up to the closing brace), or "" if there is none.
func sample(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix+" ") {
			return strings.TrimPrefix(l, prefix+" ")
		}
	}
	return ""
}

// The node's own registry has the build, membership and grant metrics.
func TestMetricsBuildMembersGrants(t *testing.T) {
	tc := newTestCluster(t, 2)
	n := tc.nodes[0]
	c := newClient(t, n.GRPCAddr())
	if _, err := c.Check(context.Background(), client.Item{Key: "m", Limit: client.Limit{Limit: 5, Period: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	lines := scrape(t, n)
	want := map[string]string{
		`sluice_build_info{commit="` + version.CommitString() + `",goversion="` + runtime.Version() + `",version="` + version.String() + `"}`: "1",
		`sluice_members{state="alive"}`:      "2",
		`sluice_members{state="suspect"}`:    "0",
		`sluice_grant_local_checks_total`:    "0",
		`sluice_grant_requests_total`:        "0",
		`sluice_grant_misses_total`:          "0",
		`sluice_grant_tokens_granted_total`:  "0",
		`sluice_grant_tokens_expired_total`:  "0",
		`sluice_grant_tokens_returned_total`: "0",
		`sluice_grant_return_failures_total`: "0",
	}
	for prefix, v := range want {
		if got := sample(lines, prefix); got != v {
			t.Errorf("%s = %q, want %q", prefix, got, v)
		}
	}
	// Replication's counters are there (their values depend on which of
	// the two nodes owns "m": TestClusterKillKeepsReplicatedCounters
	// checks what they count).
	for _, name := range []string{"sluice_replica_states_sent_total", "sluice_replica_states_failed_total",
		"sluice_replica_states_received_total", "sluice_replica_states_promoted_total",
		"sluice_replica_states_pushed_total", "sluice_replica_states"} {
		if sample(lines, name) == "" {
			t.Errorf("no %s in /metrics", name)
		}
	}
	// At least the join of the second node rebuilt the ring.
	if got := sample(lines, "sluice_ring_changes_total"); got == "" || got == "0" {
		t.Errorf("sluice_ring_changes_total = %q, want > 0", got)
	}
}

// The grant counters on /metrics are the limiter's GrantStats, and move
// when a hot key is answered from a grant.
func TestMetricsGrants(t *testing.T) {
	tc := newTestCluster(t, 2)
	n0 := tc.nodes[0]
	c := newClient(t, n0.GRPCAddr())
	lim := client.Limit{Limit: 10_000_000, Period: time.Hour}
	key := keysOwnedBy(t, c, tc.nodes[1].Name(), "metric-grant", 1, lim)[0]
	for i := 0; i < 1000; i++ {
		tc.clk.Advance(time.Millisecond)
		if _, err := c.Check(context.Background(), client.Item{Key: key, Limit: lim}); err != nil {
			t.Fatal(err)
		}
	}
	st := n0.Limiter().GrantStats()
	if st.Local == 0 || st.Requests == 0 || st.Granted == 0 {
		t.Fatalf("grant stats %+v: no grant was used", st)
	}
	lines := scrape(t, n0)
	// A refill may still be under way: each counter lies between the
	// stats read before the scrape and after it.
	end := n0.Limiter().GrantStats()
	for name, v := range map[string][2]uint64{
		"sluice_grant_local_checks_total":    {st.Local, end.Local},
		"sluice_grant_requests_total":        {st.Requests, end.Requests},
		"sluice_grant_misses_total":          {st.Misses, end.Misses},
		"sluice_grant_tokens_granted_total":  {st.Granted, end.Granted},
		"sluice_grant_tokens_expired_total":  {st.Expired, end.Expired},
		"sluice_grant_tokens_returned_total": {st.Returned, end.Returned},
		"sluice_grant_return_failures_total": {st.ReturnFailures, end.ReturnFailures},
	} {
		got, err := strconv.ParseUint(sample(lines, name), 10, 64)
		if err != nil || got < v[0] || got > v[1] {
			t.Errorf("%s = %q, want in [%d, %d]", name, sample(lines, name), v[0], v[1])
		}
	}
}
