package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	"github.com/sluice-rl/sluice/node"
)

// tpm is a token bucket of 100 tokens a minute (one every 600ms).
var tpm = client.Limit{Limit: 100, Period: time.Minute}

func reserveOK(t *testing.T, c *client.Client, key string, estimate int64) client.Reservation {
	t.Helper()
	r, err := c.Reserve(context.Background(), 0, client.ReserveItem{Key: key, Limit: tpm, Estimate: estimate})
	if err != nil || !r.Allowed || r.Items[0].ID == "" {
		t.Fatalf("reserve %d of %s: %+v %v", estimate, key, r, err)
	}
	return r
}

func settleOne(t *testing.T, c *client.Client, r client.Reservation, actual int64) client.Settled {
	t.Helper()
	s, err := c.Settle(context.Background(), r, actual)
	if err != nil || len(s) != 1 {
		t.Fatalf("settle %d: %+v %v", actual, s, err)
	}
	return s[0]
}

// Over gRPC on one node (a frozen clock): reserve 100, settle 40 gives 60
// back; a second settle changes nothing; settling 300 of a reservation of
// 60 on an empty bucket charges one burst (100) into debt below empty and
// forgives the other 140, and the next check waits out the debt and its
// own unit: 100 × 600ms + 600ms.
func TestReserveSettleGRPC(t *testing.T) {
	clk := newFakeClock()
	n := startNode(t, func(cfg *node.Config) { cfg.Clock = clk.Now })
	c := newClient(t, n.GRPCAddr())
	ctx := context.Background()

	r := reserveOK(t, c, "tenant:1", 100)
	if s := settleOne(t, c, r, 40); s.AlreadySettled || s.Refunded != 60 || s.Remaining != 60 {
		t.Fatalf("settle 40 of 100: %+v, want 60 refunded and left", s)
	}
	if s := settleOne(t, c, r, 40); !s.AlreadySettled || s.Refunded != 60 || s.Remaining != 60 {
		t.Fatalf("settle again: %+v, want already settled with the first's figures", s)
	}
	if s := settleOne(t, c, r, 90); !s.AlreadySettled || s.Actual != 40 || s.Remaining != 60 {
		t.Fatalf("settle again with another actual: %+v, want no change (actual 40 stands)", s)
	}
	if u, _ := c.Usage(ctx, "tenant:1", "", tpm); u.Remaining != 60 {
		t.Fatalf("usage after the settles: %+v, want 60 left (no double refund)", u)
	}

	r = reserveOK(t, c, "tenant:1", 60)
	s := settleOne(t, c, r, 300)
	if s.Charged != 100 || s.Forgiven != 140 || s.Remaining != 0 {
		t.Fatalf("settle 300 of 60 on an empty bucket: %+v, want 100 charged into debt and 140 forgiven", s)
	}
	check := func(name string, allowed bool, retry time.Duration) {
		t.Helper()
		res, err := c.Check(ctx, client.Item{Key: "tenant:1", Limit: tpm})
		if err != nil || res[0].Allowed != allowed || res[0].RetryAfter != retry {
			t.Fatalf("%s: %+v %v, want allowed %v retry after %v", name, res, err, allowed, retry)
		}
	}
	check("check in debt", false, 60*time.Second+600*time.Millisecond)
	clk.Advance(60 * time.Second)
	check("check with the debt paid, the bucket empty", false, 600*time.Millisecond)
	clk.Advance(600 * time.Millisecond)
	check("check once a token refilled after the debt", true, 0)

	_, err := c.Settle(ctx, client.Reservation{Items: []client.Reserved{{Key: "tenant:1", Limit: tpm, ID: strings.Repeat("0f", 16)}}}, 1)
	if st := status.Convert(errorsUnwrapAll(err)); st.Code() != codes.NotFound || !strings.Contains(st.Message(), strings.Repeat("0f", 16)) {
		t.Fatalf("unknown id: %v, want NotFound naming the id", err)
	}
}

// errorsUnwrapAll returns the innermost error (the gRPC status of a
// client error).
func errorsUnwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}

// post sends body to path on n's HTTP API and decodes the answer.
func post(t *testing.T, n *node.Node, path, body string) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.Post("http://"+n.HTTPAddr()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, out, resp.Header
}

// The same over HTTP, with tokens per minute and per month on one call.
func TestReserveSettleHTTP(t *testing.T) {
	clk := newFakeClock()
	n := startNode(t, func(cfg *node.Config) { cfg.Clock = clk.Now })
	const both = `{"key":"tenant:2","limit":100,"period":"1m"},{"key":"tenant:2","limit":1000,"calendar":"month","timezone":"Europe/Berlin"}`
	code, out, _ := post(t, n, "/v1/reserve", `{"items":[`+strings.ReplaceAll(strings.ReplaceAll(both, `"1m"}`, `"1m","estimate":100}`), `"Europe/Berlin"}`, `"Europe/Berlin","estimate":100}`)+`],"ttl":"2m"}`)
	results, _ := out["results"].([]any)
	if code != http.StatusOK || out["allowed"] != true || len(results) != 2 {
		t.Fatalf("reserve: %d %v", code, out)
	}
	ids := make([]string, 2)
	for i, r := range results {
		ids[i], _ = r.(map[string]any)["reservation_id"].(string)
	}
	settle := `{"items":[{"key":"tenant:2","limit":100,"period":"1m","reservation_id":"` + ids[0] + `","actual":40},` +
		`{"key":"tenant:2","limit":1000,"calendar":"month","timezone":"Europe/Berlin","reservation_id":"` + ids[1] + `","actual":40}]}`
	for round := range 2 {
		code, out, _ = post(t, n, "/v1/settle", settle)
		rs, _ := out["results"].([]any)
		if code != http.StatusOK || len(rs) != 2 {
			t.Fatalf("settle round %d: %d %v", round, code, out)
		}
		for i, want := range []float64{60, 960} {
			r := rs[i].(map[string]any)
			if r["refunded"] != float64(60) || r["remaining"] != want || r["already_settled"] != (round == 1) {
				t.Errorf("settle round %d item %d: %v, want 60 refunded, %v left, already_settled %v", round, i, r, want, round == 1)
			}
		}
	}
	// Over the estimate on the emptied bucket: one burst into debt, the
	// rest forgiven, and the next check is a 429 whose Retry-After counts
	// the debt.
	code, out, _ = post(t, n, "/v1/reserve", `{"items":[{"key":"tenant:2","limit":100,"period":"1m","estimate":60}]}`)
	if code != http.StatusOK {
		t.Fatalf("reserve 60: %d %v", code, out)
	}
	id := out["results"].([]any)[0].(map[string]any)["reservation_id"].(string)
	code, out, _ = post(t, n, "/v1/settle", `{"items":[{"key":"tenant:2","limit":100,"period":"1m","reservation_id":"`+id+`","actual":300}]}`)
	if r := out["results"].([]any)[0].(map[string]any); code != http.StatusOK || r["charged"] != float64(100) || r["forgiven"] != float64(140) {
		t.Fatalf("settle 300: %d %v", code, out)
	}
	code, out, hdr := post(t, n, "/v1/check", `{"checks":[{"key":"tenant:2","limit":100,"period":"1m"}]}`)
	if r := out["results"].([]any)[0].(map[string]any); code != http.StatusTooManyRequests || r["retry_after"] != "1m0.6s" || hdr.Get("Retry-After") != "61" {
		t.Fatalf("check on the bucket in debt: %d %v Retry-After %q, want 429 retry_after 1m0.6s", code, out, hdr.Get("Retry-After"))
	}
	code, out, _ = post(t, n, "/v1/settle", `{"items":[{"key":"tenant:2","limit":100,"period":"1m","reservation_id":"`+strings.Repeat("0f", 16)+`","actual":1}]}`)
	if code != http.StatusNotFound || out["field"] != "items[0].reservation_id" {
		t.Fatalf("unknown id: %d %v, want 404 naming items[0].reservation_id", code, out)
	}
}

// On a 3-node cluster a reservation made through one node is settled
// through another: both forward to the key's owner, which holds it.
func TestClusterReserveSettleAcrossNodes(t *testing.T) {
	tc := newTestCluster(t, 3)
	cs := tc.clients()
	for i, k := range keys(12) {
		via, by := cs[i%3], cs[(i+1)%3]
		r := reserveOK(t, via, k, 100)
		if s := settleOne(t, by, r, 40); s.AlreadySettled || s.Refunded != 60 || s.Remaining != 60 {
			t.Fatalf("%s (owner %s): settle through another node: %+v", k, r.Items[0].Owner, s)
		}
		if s := settleOne(t, cs[(i+2)%3], r, 40); !s.AlreadySettled || s.Remaining != 60 {
			t.Fatalf("%s: settle through the third node: %+v, want already settled", k, s)
		}
	}
}

// Reservations live with their key's state: a graceful leave moves them
// to the new owner, where they settle once.
func TestClusterLeaveMovesReservations(t *testing.T) {
	tc := newTestCluster(t, 3)
	c0 := newClient(t, tc.nodes[0].GRPCAddr())
	leaving := tc.nodes[2].Name()
	held := map[string]client.Reservation{}
	for _, k := range keys(60) {
		if ownerOf(t, c0, k, tpm).Owner == leaving {
			held[k] = reserveOK(t, c0, k, 100)
		}
	}
	if len(held) == 0 {
		t.Fatalf("%s owns none of the keys", leaving)
	}
	tc.stop(leaving)
	c1 := newClient(t, tc.nodes[1].GRPCAddr())
	for k, r := range held {
		s := settleOne(t, c1, r, 40)
		if s.AlreadySettled || s.Refunded != 60 || s.Remaining != 60 {
			t.Fatalf("%s after %s left: %+v, want the reservation found and 60 refunded", k, leaving, s)
		}
	}
}

// An unsettled reservation settles at its estimate when its TTL ends: the
// estimate stays charged and the ID is forgotten.
func TestReservationTTLSettlesAtEstimate(t *testing.T) {
	clk := newFakeClock()
	n := startNode(t, func(cfg *node.Config) { cfg.Clock = clk.Now })
	c := newClient(t, n.GRPCAddr())
	ctx := context.Background()
	lim := client.Limit{Limit: 100, Period: time.Hour} // 36s a token: the TTL refills nothing to speak of
	r, err := c.Reserve(ctx, 10*time.Second, client.ReserveItem{Key: "tenant:3", Limit: lim, Estimate: 80})
	if err != nil || !r.Allowed || r.Items[0].ExpiresAfter != 10*time.Second {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	clk.Advance(10 * time.Second)
	if _, err := c.Settle(ctx, r, 0); status.Code(errorsUnwrapAll(err)) != codes.NotFound {
		t.Fatalf("settle after the TTL: %v, want NotFound", err)
	}
	if u, _ := c.Usage(ctx, "tenant:3", "", lim); u.Remaining != 20 {
		t.Fatalf("usage after the TTL: %+v, want 20 left (the estimate of 80 stands)", u)
	}
	// TTL above the node's cap (--max-lease-ttl, 1h by default).
	_, err = c.Reserve(ctx, 2*time.Hour, client.ReserveItem{Key: "tenant:3", Limit: lim, Estimate: 1})
	if st := status.Convert(errorsUnwrapAll(err)); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "ttl: ") {
		t.Fatalf("ttl above the cap: %v, want InvalidArgument naming ttl", err)
	}
}

// Reservations are replicated with their key's state: after a kill -9 of
// the owner, the heir that takes the key over settles them.
func TestClusterKillKeepsReplicatedReservations(t *testing.T) {
	tc := &testCluster{t: t, clk: newFakeClock(), stops: map[string]func(){}}
	for i := 0; i < 3; i++ {
		tc.addWith(fmt.Sprintf("n%d", i), func(c *node.Config) { c.Replicas = 1 })
	}
	tc.waitConverged()
	c0 := newClient(t, tc.nodes[0].GRPCAddr())
	victim := tc.nodes[2]
	held := map[string]client.Reservation{}
	for _, k := range keys(60) {
		if ownerOf(t, c0, k, tpm).Owner == victim.Name() {
			held[k] = reserveOK(t, c0, k, 100)
		}
	}
	if len(held) == 0 {
		t.Fatalf("%s owns none of the keys", victim.Name())
	}
	waitFor(t, 10*time.Second, "the victim's states copied to their heirs", func() bool {
		n := int64(0)
		for _, nd := range tc.nodes[:2] {
			n += nd.Limiter().ReplicaStats().Held
		}
		return n >= int64(len(held))
	})
	victim.Inject(node.FaultCrash)
	tc.nodes = tc.nodes[:2]
	tc.waitConverged()
	c1 := newClient(t, tc.nodes[1].GRPCAddr())
	// Until the dead wait is over, the new owner does not decide the
	// victim's keys: a settle is Unavailable with nothing applied, and is
	// sent again until it is decided.
	for k, r := range held {
		var s client.Settled
		waitFor(t, 10*time.Second, "a settle past the dead wait", func() bool {
			out, err := c1.Settle(context.Background(), r, 40)
			if code := status.Code(errorsUnwrapAll(err)); code == codes.Unavailable {
				return false
			} else if err != nil || len(out) != 1 {
				t.Fatalf("settle of %s: %+v %v (code %v), want it settled or Unavailable", k, out, err, code)
			}
			s = out[0]
			return true
		})
		if s.AlreadySettled || s.Refunded != 60 || s.Remaining != 60 {
			t.Fatalf("%s after its owner %s was killed: %+v, want the replicated reservation settled, 60 refunded", k, victim.Name(), s)
		}
	}
}
