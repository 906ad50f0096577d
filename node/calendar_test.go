package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/client"
	sluicev1 "github.com/sluice-rl/sluice/proto/sluice/v1"
)

// TestCalendarResetAtBoundary: a quota of 2 a day in Europe/Berlin, sent
// to a node that forwards it to the key's owner, through the HTTP API, the
// gRPC API and the Go client. The clock is the cluster's fake one, at
// 2026-12-02 12:00 UTC, 13:00 in Berlin: reset_after, Retry-After and
// RateLimit-Reset are the 11 hours to Berlin's midnight, and at midnight
// the quota is full again, for 24 hours.
func TestCalendarResetAtBoundary(t *testing.T) {
	tc := newTestCluster(t, 2)
	n0 := tc.nodes[0]
	lim := client.Limit{Algorithm: client.TokenBucket, Limit: 2, Calendar: client.Day, Timezone: "Europe/Berlin"}
	cl := newClient(t, n0.GRPCAddr())
	var key string
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("tenant-%d", i)
		if ownerOf(t, cl, k, lim).Owner != n0.Name() {
			key = k
		}
	}

	post := func(body string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := http.Post("http://"+n0.HTTPAddr()+"/v1/check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp, out
	}
	item := func(cost int) string {
		return fmt.Sprintf(`{"checks":[{"key":%q,"limit":2,"calendar":"day","timezone":"Europe/Berlin","cost":%d}]}`, key, cost)
	}
	result := func(out map[string]any) map[string]any {
		return out["results"].([]any)[0].(map[string]any)
	}

	// HTTP: spend the day's quota.
	resp, out := post(item(2))
	if r := result(out); resp.StatusCode != 200 || r["reset_after"] != "11h0m0s" || r["remaining"] != 0.0 || r["owner"] == n0.Name() {
		t.Fatalf("HTTP spend: %d %v, want 200, reset_after 11h0m0s, none remaining, answered by the owner", resp.StatusCode, out)
	}
	if got := resp.Header.Get("RateLimit-Reset"); got != "39600" {
		t.Errorf("RateLimit-Reset %q, want 39600 (11h)", got)
	}

	// gRPC: denied until midnight.
	cc, err := grpc.NewClient(n0.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rl := sluicev1.NewRateLimiterClient(cc)
	grpcCheck := func(cost int64, tz string) (*sluicev1.CheckResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := rl.Check(ctx, &sluicev1.CheckRequest{Items: []*sluicev1.CheckItem{{Key: key, Cost: &cost,
			Spec: &sluicev1.CheckItem_Limit{Limit: &sluicev1.Limit{Algorithm: sluicev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Limit: 2,
				Calendar: sluicev1.Calendar_CALENDAR_DAY, Timezone: tz}}}}})
		if err != nil {
			return nil, err
		}
		return r.GetResults()[0], nil
	}
	r, err := grpcCheck(1, "Europe/Berlin")
	if err != nil || r.GetAllowed() || r.GetRetryAfter().AsDuration() != 11*time.Hour || r.GetResetAfter().AsDuration() != 11*time.Hour {
		t.Fatalf("gRPC over the quota: %v %v, want denied, retry_after and reset_after 11h", r, err)
	}
	resp, _ = post(item(1))
	if got := resp.Header.Get("Retry-After"); resp.StatusCode != 429 || got != "39600" {
		t.Errorf("HTTP over the quota: %d, Retry-After %q, want 429 and 39600", resp.StatusCode, got)
	}

	// One nanosecond before Berlin's midnight, still denied; at midnight,
	// full again for the 24 hours of 2026-12-03.
	tc.clk.Advance(11*time.Hour - time.Nanosecond)
	if r, err := grpcCheck(1, "Europe/Berlin"); err != nil || r.GetAllowed() || r.GetRetryAfter().AsDuration() != time.Nanosecond {
		t.Fatalf("gRPC at 23:59:59.999999999: %v %v, want denied for 1ns", r, err)
	}
	tc.clk.Advance(time.Nanosecond)
	if r, err := grpcCheck(1, "Europe/Berlin"); err != nil || !r.GetAllowed() || r.GetRemaining() != 1 || r.GetResetAfter().AsDuration() != 24*time.Hour {
		t.Fatalf("gRPC at midnight: %v %v, want allowed, 1 remaining, reset_after 24h", r, err)
	}
	resp, out = post(item(1))
	if r := result(out); resp.StatusCode != 200 || r["reset_after"] != "24h0m0s" || r["remaining"] != 0.0 {
		t.Errorf("HTTP at midnight: %d %v, want 200, reset_after 24h0m0s, none remaining", resp.StatusCode, out)
	}
	if res := ownerOf(t, cl, key, lim); res.Remaining != 0 || res.ResetAfter != 24*time.Hour {
		t.Errorf("Go client usage: %+v, want none remaining for 24h", res)
	}

	// Bad zones are InvalidArgument naming the field, in both APIs.
	if _, err := grpcCheck(1, "Europe/Atlantis"); status.Code(err) != codes.InvalidArgument || !badRequestNames(status.Convert(err), "items[0].limit.timezone") {
		t.Errorf("gRPC with an unknown zone: %v, want InvalidArgument naming items[0].limit.timezone", err)
	}
	resp, out = post(`{"checks":[{"key":"k","limit":2,"calendar":"day","timezone":"Europe/Atlantis"}]}`)
	if resp.StatusCode != 400 || out["field"] != "checks[0].timezone" {
		t.Errorf("HTTP with an unknown zone: %d %v, want 400 naming checks[0].timezone", resp.StatusCode, out)
	}
	resp, out = post(`{"checks":[{"key":"k","limit":2,"calendar":"day","algorithm":"sliding_window"}]}`)
	if resp.StatusCode != 400 || out["field"] != "checks[0].calendar" {
		t.Errorf("HTTP calendar of a sliding window: %d %v, want 400 naming checks[0].calendar", resp.StatusCode, out)
	}
}
